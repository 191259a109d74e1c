package prepare

import (
	"context"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// undoReallocated undoes the recorded preparation of claim when its
// allocation now names other devices. The claim was deallocated once its
// pods were done (the controller does not wait for the kubelet's
// unprepare) and allocated again here, and the kubelet asks again after a
// restart or a failed prepare. What was prepared for the old allocation
// goes, so that no pod gets devices the scheduler counts as free and no
// instance is left. A container can still run on the old devices only
// where the kubelet itself raced (a new pod attached to the old
// preparation) or a pod was force-deleted with its containers running;
// NVML then refuses to destroy an instance a CUDA process holds, and the
// prepare fails until that process ends.
func (p *Preparer) undoReallocated(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	c, ok := p.claims[string(claim.UID)]
	if !ok || claim.Status.Allocation == nil || p.sameDevices(c, claim) {
		return nil
	}
	klog.FromContext(ctx).Info("Claim allocated other devices since it was prepared: undoing the old preparation", "claim", claimRef(c))
	return p.unprepare(ctx, c)
}

// sameDevices reports whether c, as the checkpoint records it, was
// prepared for the claim's current allocation: the same devices of this
// driver, in order, with the same share IDs and access.
func (p *Preparer) sameDevices(c Claim, claim *resourceapi.ResourceClaim) bool {
	type key struct {
		device, shareID string
		admin           bool
	}
	var want []key
	if a := claim.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			if r.Driver != p.layout.Driver {
				continue
			}
			k := key{device: r.Device, admin: ptr.Deref(r.AdminAccess, false)}
			if r.ShareID != nil {
				k.shareID = string(*r.ShareID)
			}
			want = append(want, k)
		}
	}
	got := make([]key, len(c.Devices))
	for i, d := range c.Devices {
		got[i] = key{d.Device, d.ShareID, d.AdminAccess}
	}
	return slices.Equal(got, want)
}
