package allocator

import (
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

func allocated(c *resourceapi.ResourceClaim, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	return c
}

func result(device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: drvNVIDIA, Pool: "node-a", Device: device}
}

func TestLedger(t *testing.T) {
	l := NewLedger(DefaultFeatures())
	a := allocated(claimOf("a", exact("r", gpuClass.Name, 1)), result("gpu-0"))
	l.SetClaim(a)
	admin := result("gpu-0")
	admin.AdminAccess = ptr.To(true)
	l.SetClaim(allocated(claimOf("monitor", exact("r", gpuClass.Name, 1)), admin))
	share := result("gpu-1")
	share.ShareID = ptr.To(types.UID("s1"))
	share.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}
	l.SetClaim(allocated(claimOf("shared", exact("r", sharedClass.Name, 1)), share))

	s := l.State()
	if !s.AllocatedDevices.Has(structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-0")) || s.AllocatedDevices.Len() != 1 {
		t.Errorf("allocated devices %v, want only gpu-0 (admin access and shares do not count)", s.AllocatedDevices.UnsortedList())
	}
	if s.AllocatedSharedDeviceIDs.Len() != 1 || s.AggregatedCapacity[structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-1")] == nil {
		t.Errorf("shares %v, capacity %v: want gpu-1's share", s.AllocatedSharedDeviceIDs, s.AggregatedCapacity)
	}

	// Reserving a device held by another claim is refused, naming both.
	b := claimOf("b", exact("r", gpuClass.Name, 1))
	err := l.Reserve(b, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-0")}}})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "default/b") || !strings.Contains(err.Error(), "default/a") {
		t.Errorf("Reserve on a held device: %v, want ErrConflict naming both claims", err)
	}
	// Exclusive use of a shared device is refused too.
	if err := l.Reserve(b, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-1")}}}); !errors.Is(err, ErrConflict) {
		t.Errorf("exclusive Reserve of a shared device: %v, want ErrConflict", err)
	}
	// A free device reserves, shows in State, and is released.
	if err := l.Reserve(b, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-2")}}}); err != nil {
		t.Fatal(err)
	}
	if !l.InFlight(b.UID) || !l.State().AllocatedDevices.Has(structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-2")) {
		t.Error("in-flight gpu-2 missing from state")
	}
	l.Release(b.UID)
	if l.InFlight(b.UID) || l.State().AllocatedDevices.Has(structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-2")) {
		t.Error("released gpu-2 still in state")
	}
	// Writing the allocation replaces the in-flight entry.
	if err := l.Reserve(b, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-3")}}}); err != nil {
		t.Fatal(err)
	}
	l.SetClaim(allocated(b, result("gpu-3")))
	if l.InFlight(b.UID) {
		t.Error("allocated claim still in flight")
	}
	l.DeleteClaim(a.UID)
	if l.State().AllocatedDevices.Has(structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-0")) {
		t.Error("deleted claim's device still allocated")
	}
}

// The engine must not propose a device that the ledger holds, across pods
// allocated one after the other through Reserve.
func TestLedgerWithEngine(t *testing.T) {
	l := NewLedger(DefaultFeatures())
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory([]*resourceapi.ResourceSlice{pairNode("node-a")}, DefaultFeatures())
	seen := map[string]bool{}
	for i := range 4 {
		c := claimOf(string(rune('a'+i)), exact("r", gpuClass.Name, 2))
		res, err := e.NewSession(inv, testClasses, l.State(), []*resourceapi.ResourceClaim{c}).Allocate(t.Context(), node("node-a"))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if err := l.Reserve(c, &res.Allocations[0]); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		for _, d := range deviceNames(res.Allocations) {
			if seen[d] {
				t.Fatalf("device %s allocated twice", d)
			}
			seen[d] = true
		}
		if !res.Quality.MultiDevice || res.Quality.WorstLink.String() != "nvlink" {
			t.Errorf("pod %d: %v, want an NVLink pair", i, res.Quality)
		}
	}
	c := claimOf("e", exact("r", gpuClass.Name, 1))
	if _, err := e.NewSession(inv, testClasses, l.State(), []*resourceapi.ResourceClaim{c}).Allocate(t.Context(), node("node-a")); !errors.Is(err, ErrUnsatisfiable) {
		t.Errorf("full node: %v, want ErrUnsatisfiable", err)
	}
}
