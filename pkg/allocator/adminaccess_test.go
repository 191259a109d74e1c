package allocator

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func admin(r resourceapi.DeviceRequest) resourceapi.DeviceRequest {
	r.Exactly.AdminAccess = ptr.To(true)
	return r
}

// An admin-access claim takes no device (the scheduler's tracker does
// not count it), so its solution scores as "no change": no GPUs in the
// workload it describes, no link class, the node's measures unchanged.
// Its devices still keep the pod's other claims off them.
func TestAdminAccessIsScoredAsTakingNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		slices   []*resourceapi.ResourceSlice
		claims   []*resourceapi.ResourceClaim
		wantGPUs int
	}{
		{name: "two whole GPUs", slices: []*resourceapi.ResourceSlice{pairNode("node-a")},
			claims: []*resourceapi.ResourceClaim{claimOf("mon", admin(exact("r", gpuClass.Name, 2)))}},
		{name: "every GPU", slices: []*resourceapi.ResourceSlice{pairNode("node-a")},
			claims: []*resourceapi.ResourceClaim{claimOf("mon", func() resourceapi.DeviceRequest {
				r := admin(exact("r", gpuClass.Name, 1))
				r.Exactly.AllocationMode, r.Exactly.Count = resourceapi.DeviceAllocationModeAll, 0
				return r
			}())}},
		{name: "a MIG partition", slices: migNode("node-a", 1),
			claims: []*resourceapi.ResourceClaim{claimOf("mon", admin(exact("r", migClass.Name, 1, `device.attributes["gpu.nvidia.com"].profile == "3g.40gb"`)))}},
		{name: "a share", slices: []*resourceapi.ResourceSlice{sharedNode("node-a", 2)},
			claims: []*resourceapi.ResourceClaim{claimOf("mon", admin(exact("r", sharedClass.Name, 1)))}},
		{name: "beside a claim of the same pod", slices: []*resourceapi.ResourceSlice{pairNode("node-a")},
			claims:   []*resourceapi.ResourceClaim{claimOf("mon", admin(exact("r", gpuClass.Name, 4))), claimOf("job", exact("r", gpuClass.Name, 2))},
			wantGPUs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.NewSession(NewInventory(tc.slices, DefaultFeatures()), testClasses, emptyState(), tc.claims).Allocate(t.Context(), node("node-a"), nil)
			if err != nil {
				t.Fatal(err)
			}
			q := res.Quality
			if q.Request.GPUs != tc.wantGPUs {
				t.Errorf("request class has %d GPUs, want %d", q.Request.GPUs, tc.wantGPUs)
			}
			if tc.wantGPUs == 0 {
				if q.MultiDevice || q.Fragmentation != q.FragmentationBefore || q.Intactness != q.IntactnessBefore || q.MIGPlaceable != q.MIGPlaceableBefore {
					t.Errorf("quality %+v, want the node unchanged", q)
				}
			}
			taken := map[string]string{}
			for ci, a := range res.Allocations {
				for _, r := range a.Devices.Results {
					if other, ok := taken[r.Device]; ok && !ptr.Deref(r.AdminAccess, false) {
						t.Errorf("device %s given to %s and %s", r.Device, other, tc.claims[ci].Name)
					}
					taken[r.Device] = tc.claims[ci].Name
				}
			}
		})
	}
}
