package allocator

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestSelectionsKeptBySelectors: a node's view keeps what a session's
// requests select, for sessions with the same selectors (other claims,
// other counts) to reuse; a session with other selectors, in the class
// or the request, gets answers of its own, and answers with an error
// are not kept.
func TestSelectionsKeptBySelectors(t *testing.T) {
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory([]*resourceapi.ResourceSlice{pairNode("n1")}, DefaultFeatures())
	n := node("n1")
	view, err := inv.view(n)
	if err != nil {
		t.Fatal(err)
	}
	gpu3 := `device.attributes["gpu.nvidia.com"].uuid == "GPU-n1-3"`
	gpu5 := `device.attributes["gpu.nvidia.com"].uuid == "GPU-n1-5"`
	failing := `device.attributes["gpu.nvidia.com"].noSuchAttribute == 1`
	classes := classList{class("gpu"), class("gpu5", gpu5)}
	allocate := func(claim *resourceapi.ResourceClaim) (string, error) {
		t.Helper()
		res, err := e.NewSession(inv, classes, emptyState(), []*resourceapi.ResourceClaim{claim}).Allocate(context.Background(), n, nil)
		if err != nil {
			return "", err
		}
		return res.Allocations[0].Devices.Results[0].Device, nil
	}
	kept := func() int {
		count := 0
		for _, k := range view.selections.kept {
			if k.known != nil {
				count++
			}
		}
		return count
	}
	for i, step := range []struct {
		claim *resourceapi.ResourceClaim
		want  string // the device, or "" for an error
		kept  int
	}{
		{claim: claimOf("a", exact("r", "gpu", 1, gpu3)), want: "gpu-3", kept: 1},
		{claim: claimOf("f", exact("r", "gpu", 1, failing)), kept: 1},
		{claim: claimOf("b", exact("r", "gpu", 1, gpu3)), want: "gpu-3", kept: 1},
		{claim: claimOf("c", exact("r", "gpu", 1, gpu5)), want: "gpu-5", kept: 2},
		{claim: claimOf("d", exact("r", "gpu5", 1)), want: "gpu-5", kept: 3},
		{claim: claimOf("e", exact("r", "gpu5", 1, gpu3)), kept: 4},
		{claim: claimOf("g", exact("r", "gpu", 1, gpu3)), want: "gpu-3", kept: 4},
	} {
		got, err := allocate(step.claim)
		switch {
		case step.want == "" && err == nil:
			t.Errorf("step %d: allocated %s, want an error", i, got)
		case step.want != "" && got != step.want:
			t.Errorf("step %d: allocated %q (%v), want %s", i, got, err, step.want)
		}
		if k := kept(); k != step.kept {
			t.Errorf("step %d: %d selections kept, want %d", i, k, step.kept)
		}
	}
}
