package prepare

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

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
