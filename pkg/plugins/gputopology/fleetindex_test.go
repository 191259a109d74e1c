package gputopology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// TestFleetIndex: the index counts what topology.WholeGPUsByNode counts
// on the inventory's slices (which hold no shared GPUs, which only the
// index counts), taken GPUs and shares alike, and is built once per
// inventory.
func TestFleetIndex(t *testing.T) {
	inv := allocator.NewInventory([]*resourceapi.ResourceSlice{pairSlice("n1", 4), pcieSlice("n2", 2)}, allocator.DefaultFeatures())
	share := types.UID("share")
	state := &allocator.AllocatedState{
		AllocatedDevices: sets.New(structured.MakeDeviceID(contract.DefaultDriver, "n1", "gpu-0")),
		AllocatedSharedDeviceIDs: sets.New(structured.MakeSharedDeviceID(
			structured.MakeDeviceID(contract.DefaultDriver, "n2", "gpu-1"), &share)),
	}
	var indexes fleetIndexes
	x := indexes.of(inv)
	got := x.count(state)
	want := topology.WholeGPUsByNode(inv.Slices(), TakenIn(state))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("count (-WholeGPUsByNode +index):\n%s", diff)
	}
	if got["n1"].Free != 3 || got["n2"].Free != 1 {
		t.Errorf("free GPUs: n1 %d, n2 %d; want 3 and 1", got["n1"].Free, got["n2"].Free)
	}
	if indexes.of(inv) != x {
		t.Error("the same inventory was indexed again")
	}
	if next := inv.Refresh([]*resourceapi.ResourceSlice{pairSlice("n1", 8)}); indexes.of(next) == x {
		t.Error("a new inventory kept the old index")
	} else if n := indexes.of(next).count(state)["n1"].GPUs; n != 8 {
		t.Errorf("after the refresh n1 has %d GPUs, want 8", n)
	}
}
