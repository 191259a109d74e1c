package allocator

import (
	"context"
	"errors"
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/topology"
)

// TestBareNode: a pod without claims on a node that no slice reaches gets
// what the search finds on a node whose slice publishes no device,
// whatever the node's CPU and memory (the "no change" of Packing), from a
// session that measured such a node before or not; nodes with devices are
// still measured, a done context still gets an error, and claims are
// still refused there.
func TestBareNode(t *testing.T) {
	ctx, e, inv := sharedNodeEngine(t)
	// node-empty's slice publishes no device: a pool, so the search runs
	// there, and what it finds is what a node without slices must get.
	inv = NewInventory(append(inv.Slices(), gpuSlice("node-empty", nil)), DefaultFeatures())
	w := topology.Workload{{GPUs: 1, Share: 1, Weight: 1, CPUMilli: 4000}}
	pod := topology.Host{CPUMilli: 8000, MemoryMiB: 16384}
	hosts := []struct {
		name string
		host *HostUse
	}{
		{"host not counted", nil},
		{"CPU to spare", &HostUse{Free: topology.Host{CPUMilli: 64000, MemoryMiB: 262144}, Pod: pod}},
		{"last CPU taken", &HostUse{Free: topology.Host{CPUMilli: 10000, MemoryMiB: 262144}, Pod: pod, Contention: 0.5, Excluded: 0.25}},
		{"memory short", &HostUse{Free: topology.Host{CPUMilli: 64000, MemoryMiB: 4096}, Pod: pod}},
	}
	// Whichever node comes first fills the session's result: both orders.
	for _, order := range []string{"forward", "reverse"} {
		shared := e.NewSession(inv, testClasses, emptyState(), nil).WithWorkload(w)
		for i := range hosts {
			if order == "reverse" {
				i = len(hosts) - 1 - i
			}
			name, host := hosts[i].name, hosts[i].host
			t.Run(order+"/"+name, func(t *testing.T) {
				fresh, err := e.NewSession(inv, testClasses, emptyState(), nil).WithWorkload(w).Allocate(ctx, node("node-empty"), host)
				if err != nil {
					t.Fatal(err)
				}
				got, err := shared.Allocate(ctx, node("node-cpu-"+name), host)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, fresh) {
					t.Errorf("result %#v, want %#v as searched on a node without devices", got.Quality, fresh.Quality)
				}
				if len(got.Allocations) != 0 || got.Quality.PackingScore() != 50 || got.Quality.PackingCost != 0 {
					t.Errorf("allocations %v, packing score %v (cost %v); want none, 50 (0)", got.Allocations, got.Quality.PackingScore(), got.Quality.PackingCost)
				}
			})
		}
		if shared.bare.Load() == nil {
			t.Errorf("%s: the session kept no result for nodes without slices", order)
		}
	}

	// The same session still measures a node with GPUs: 10 cores before,
	// 2 after, so both free GPUs are stranded for the class.
	shared := e.NewSession(inv, testClasses, emptyState(), nil).WithWorkload(w)
	if _, err := shared.Allocate(ctx, node("node-cpu"), nil); err != nil {
		t.Fatal(err)
	}
	res, err := shared.Allocate(ctx, node("node-sh"), &HostUse{Free: topology.Host{CPUMilli: 10000, MemoryMiB: 262144}, Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Quality; q.FragmentationBefore != 0 || q.Fragmentation != 2 {
		t.Errorf("node-sh after bare nodes: fragmentation %.3f -> %.3f, want 0 -> 2", q.FragmentationBefore, q.Fragmentation)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := shared.Allocate(done, node("node-cpu"), nil); err == nil {
		t.Error("done context: a remembered result, want the search's error")
	}

	claims := []*resourceapi.ResourceClaim{sharedClaim("c", "40Gi")}
	if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(ctx, node("node-cpu"), nil); !errors.Is(err, ErrUnsatisfiable) {
		t.Errorf("claim on a node without slices: err %v, want ErrUnsatisfiable", err)
	}
}
