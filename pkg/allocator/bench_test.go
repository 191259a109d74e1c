package allocator

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Benchmarks of one pod's Filter work: a claim checked against every node,
// by upstream's allocator and by the engine, on identical inputs. The
// engine's Inventory is built once, as the scheduler rebuilds it only when
// slices change; the "cold" variant rebuilds it for every pod, and the
// "memo" variant lets the solution memo answer the repeated pod.

type benchShape struct {
	name   string
	slices func(node string) []*resourceapi.ResourceSlice
	claim  func() *resourceapi.ResourceClaim
	// busy marks devices held on every node, to model a loaded cluster.
	busy []string
}

var benchShapes = []benchShape{
	{name: "nvlink-pairs/2gpu", slices: func(n string) []*resourceapi.ResourceSlice { return []*resourceapi.ResourceSlice{pairNode(n)} },
		claim: func() *resourceapi.ResourceClaim { return claimOf("c", exact("r", gpuClass.Name, 2)) }, busy: []string{"gpu-0", "gpu-3"}},
	{name: "nvswitch/4gpu", slices: func(n string) []*resourceapi.ResourceSlice { return []*resourceapi.ResourceSlice{nvswitchNode(n)} },
		claim: func() *resourceapi.ResourceClaim { return claimOf("c", exact("r", gpuClass.Name, 4)) }, busy: []string{"gpu-1"}},
	{name: "mig-a100x8/1g", slices: func(n string) []*resourceapi.ResourceSlice { return migNode(n, 8) },
		claim: func() *resourceapi.ResourceClaim { return migClaim("c", "1g.10gb") }, busy: []string{"gpu-0", "gpu-1-mig-3g.40gb-4"}},
	{name: "shared-l40sx8/10Gi", slices: func(n string) []*resourceapi.ResourceSlice { return []*resourceapi.ResourceSlice{sharedNode(n, 8)} },
		claim: func() *resourceapi.ResourceClaim { return sharedClaim("c", "10Gi") }},
}

func benchCluster(shape benchShape, nodes int) ([]*resourceapi.ResourceSlice, []*v1.Node, *AllocatedState) {
	var sl []*resourceapi.ResourceSlice
	var ns []*v1.Node
	state := emptyState()
	for i := range nodes {
		name := fmt.Sprintf("node-%03d", i)
		ns = append(ns, node(name))
		sl = append(sl, shape.slices(name)...)
		for _, d := range shape.busy {
			state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, name, d))
		}
	}
	return sl, ns, state
}

func BenchmarkFilterAllNodes(b *testing.B) {
	features := DefaultFeatures()
	for _, shape := range benchShapes {
		for _, nodes := range []int{1, 10, 100} {
			sl, ns, state := benchCluster(shape, nodes)
			claims := []*resourceapi.ResourceClaim{shape.claim()}
			ctx := context.Background()
			b.Run(fmt.Sprintf("%s/nodes=%d/impl=upstream", shape.name, nodes), func(b *testing.B) {
				celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
				b.ReportAllocs()
				for b.Loop() {
					a, err := structured.NewAllocator(ctx, features, *state, testClasses, sl, celCache)
					if err != nil {
						b.Fatal(err)
					}
					for _, n := range ns {
						if res, err := a.Allocate(ctx, n, claims); err != nil || res == nil {
							b.Fatalf("upstream: %v %v", res, err)
						}
					}
				}
			})
			for _, impl := range []struct {
				name   string
				policy Policy
				cold   bool
				// memo: the pod repeats the last one on unchanged nodes
				// and the memo answers; the others measure the search.
				memo bool
				// refresh: before each pod one node's slices change (a
				// node agent's taint, a rolling upgrade) and the
				// inventory is refreshed, as the scheduler does.
				refresh bool
			}{{"gputopo", DefaultPolicy(), false, false, false}, {"gputopo-firstfit", firstFitPolicy(), false, false, false}, {"gputopo-cold", DefaultPolicy(), true, false, false},
				{"gputopo-memo", DefaultPolicy(), false, true, false}, {"gputopo-refresh", DefaultPolicy(), false, false, true}} {
				b.Run(fmt.Sprintf("%s/nodes=%d/impl=%s", shape.name, nodes, impl.name), func(b *testing.B) {
					e, err := New(Options{Features: features, Policy: impl.policy})
					if err != nil {
						b.Fatal(err)
					}
					e.noMemo = !impl.memo
					inv := NewInventory(sl, features)
					cur, next := slices.Clone(sl), 0
					b.ReportAllocs()
					for b.Loop() {
						if impl.cold {
							inv = NewInventory(sl, features)
						}
						if impl.refresh {
							name := ns[next%len(ns)].Name
							for i, s := range cur {
								if *s.Spec.NodeName == name {
									cur[i] = s.DeepCopy()
								}
							}
							next++
							inv = inv.Refresh(cur)
						}
						s := e.NewSession(inv, testClasses, state, claims)
						for _, n := range ns {
							if _, err := s.Allocate(ctx, n, nil); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkMeasureMixedFleet: the measurement of a pod without claims on
// every node of a fleet of 100 GPU nodes and 900 CPU nodes. Every node has
// its own free CPU, and a different one for every pod (as in a busy
// cluster), so that the solution memo does not answer.
func BenchmarkMeasureMixedFleet(b *testing.B) {
	features := DefaultFeatures()
	var sl []*resourceapi.ResourceSlice
	var ns []*v1.Node
	for i := range 1000 {
		name := fmt.Sprintf("node-%04d", i)
		ns = append(ns, node(name))
		if i%10 == 0 {
			sl = append(sl, pairNode(name))
		}
	}
	e, err := New(Options{Features: features, Policy: DefaultPolicy()})
	if err != nil {
		b.Fatal(err)
	}
	inv, ctx := NewInventory(sl, features), context.Background()
	pod := topology.Host{CPUMilli: 4000, MemoryMiB: 8192}
	b.ReportAllocs()
	busy := int64(0)
	for b.Loop() {
		s := e.NewSession(inv, testClasses, emptyState(), nil)
		busy++
		for i, n := range ns {
			host := &HostUse{Free: topology.Host{CPUMilli: 8000 + int64(i)*1000 + busy, MemoryMiB: 262144}, Pod: pod}
			if _, err := s.Allocate(ctx, n, host); err != nil {
				b.Fatal(err)
			}
		}
	}
}
