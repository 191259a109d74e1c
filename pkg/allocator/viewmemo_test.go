package allocator

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestViewMemoConcurrent: sessions of different pods filter one node at
// once (the scheduler's parallel Filter, preemption's dry runs) and share
// its view's memo; every one gets the answer a lone session gets. Run
// with -race to check the memo's synchronization.
func TestViewMemoConcurrent(t *testing.T) {
	features := DefaultFeatures()
	features.ConsumableCapacity = true
	inv := NewInventory([]*resourceapi.ResourceSlice{identicalGPUs("n", 8)}, features)
	e, err := New(Options{Features: features, Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	claims := []*resourceapi.ResourceClaim{
		claimOf("odd", exact("r", gpuClass.Name, 2, `device.attributes["`+drvNVIDIA+`"].index % 2 == 1`)),
		claimOf("any", exact("r", gpuClass.Name, 3)),
	}
	allocate := func(c *resourceapi.ResourceClaim) []string {
		res, err := e.NewSession(inv, testClasses, emptyState(), []*resourceapi.ResourceClaim{c}).Allocate(context.Background(), node("n"), nil)
		if err != nil {
			t.Error(err)
			return nil
		}
		return deviceNames(res.Allocations)
	}
	want := map[string][]string{"odd": {"gpu-1", "gpu-3"}, "any": {"gpu-0", "gpu-1", "gpu-2"}}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				c := claims[i%2]
				if diff := cmp.Diff(want[c.Name], allocate(c)); diff != "" {
					t.Errorf("claim %s (-want +got):\n%s", c.Name, diff)
					return
				}
			}
		})
	}
	wg.Wait()
}
