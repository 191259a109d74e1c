package allocator

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Quality tests: on real node shapes, the engine's choice against
// upstream's first-fit choice for the same input, in the same test.

type sideBySide struct {
	ours     *Result
	upstream []resourceapi.AllocationResult
}

func allocateBoth(t *testing.T, sl []*resourceapi.ResourceSlice, state *AllocatedState, claims ...*resourceapi.ResourceClaim) sideBySide {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	return allocateBothCtx(ctx, t, sl, state, claims...)
}

func allocateBothCtx(ctx context.Context, t *testing.T, sl []*resourceapi.ResourceSlice, state *AllocatedState, claims ...*resourceapi.ResourceClaim) sideBySide {
	t.Helper()
	n := node(*sl[0].Spec.NodeName)
	f := DefaultFeatures()
	up, err := structured.NewAllocator(ctx, f, *state, testClasses, sl, cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
	if err != nil {
		t.Fatal(err)
	}
	upRes, err := up.Allocate(ctx, n, claims)
	if err != nil {
		t.Fatalf("upstream: %v", err)
	}
	e, err := New(Options{Features: f, Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := e.NewSession(NewInventory(sl, f), testClasses, state, claims).Allocate(ctx, n, nil)
	if (err == nil) != (upRes != nil) {
		t.Fatalf("feasibility differs: upstream %v, gputopo err %v", upRes != nil, err)
	}
	return sideBySide{ours: ours, upstream: upRes}
}

// worstLink computes the worst pair class of every claim's devices.
func worstLink(t *testing.T, sl []*resourceapi.ResourceSlice, results []resourceapi.AllocationResult) topology.LinkClass {
	t.Helper()
	worst := topology.LinkSameGPU
	for _, a := range results {
		var set []topology.GPU
		for _, r := range a.Devices.Results {
			set = append(set, describe(t, sl, r.Device))
		}
		worst = max(worst, topology.WorstPair(set))
	}
	return worst
}

func describe(t *testing.T, sl []*resourceapi.ResourceSlice, name string) topology.GPU {
	t.Helper()
	for _, s := range sl {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return topology.Describe(s.Spec.Driver, *s.Spec.NodeName, d.Attributes)
			}
		}
	}
	t.Fatalf("device %s not found", name)
	return topology.GPU{}
}

func TestQualityNVLinkPairs(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{pairNode("node-a")}
	tests := []struct {
		name          string
		count         int64
		held          []string
		wantOurs      topology.LinkClass
		wantUpstream  topology.LinkClass
		wantOursNames []string
	}{
		{name: "2 GPUs get an NVLink pair", count: 2, wantOurs: topology.LinkNVLink, wantUpstream: topology.LinkNUMA},
		{name: "4 GPUs get two pairs on one NUMA node", count: 4, wantOurs: topology.LinkNUMA, wantUpstream: topology.LinkSystem},
		{name: "8 GPUs: the whole node", count: 8, wantOurs: topology.LinkSystem, wantUpstream: topology.LinkSystem},
		{name: "1 GPU fills the broken pair", count: 1, held: []string{"gpu-5"}, wantOurs: topology.LinkSameGPU, wantUpstream: topology.LinkSameGPU, wantOursNames: []string{"gpu-1"}},
		{name: "2 GPUs avoid breaking a second pair", count: 2, held: []string{"gpu-0"}, wantOurs: topology.LinkNVLink, wantUpstream: topology.LinkSystem, wantOursNames: []string{"gpu-1", "gpu-5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := emptyState()
			for _, h := range tc.held {
				state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", h))
			}
			got := allocateBoth(t, sl, state, claimOf("tp", exact("gpus", gpuClass.Name, tc.count)))
			if l := worstLink(t, sl, got.ours.Allocations); l != tc.wantOurs {
				t.Errorf("gputopo: worst link %s, want %s (devices %v)", l, tc.wantOurs, deviceNames(got.ours.Allocations))
			}
			if l := worstLink(t, sl, got.upstream); l != tc.wantUpstream {
				t.Errorf("upstream: worst link %s, want %s (devices %v)", l, tc.wantUpstream, deviceNames(got.upstream))
			}
			if tc.wantOursNames != nil {
				names := deviceNames(got.ours.Allocations)
				slices.Sort(names)
				if !slices.Equal(names, tc.wantOursNames) {
					t.Errorf("gputopo picked %v, want %v", names, tc.wantOursNames)
				}
			}
		})
	}
}

func TestQualityNVSwitchInferred(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{nvswitchNode("node-s")}
	for _, count := range []int64{2, 4, 8} {
		got := allocateBoth(t, sl, emptyState(), claimOf("tp", exact("gpus", gpuClass.Name, count)))
		if l := worstLink(t, sl, got.ours.Allocations); l != topology.LinkNVLink {
			t.Errorf("%d GPUs: gputopo worst link %s, want nvlink", count, l)
		}
		if !got.ours.Quality.MultiDevice || got.ours.Quality.WorstLink != topology.LinkNVLink {
			t.Errorf("%d GPUs: quality %v does not report the NVLink class", count, got.ours.Quality)
		}
	}
	// Best-fit across NUMA nodes: with NUMA 1 already half used, a 2-GPU
	// claim goes there and keeps NUMA 0's four GPUs together.
	state := emptyState()
	for _, h := range []string{"gpu-4", "gpu-5"} {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-s", h))
	}
	got := allocateBoth(t, sl, state, claimOf("tp", exact("gpus", gpuClass.Name, 2)))
	names := deviceNames(got.ours.Allocations)
	slices.Sort(names)
	if want := []string{"gpu-6", "gpu-7"}; !slices.Equal(names, want) {
		t.Errorf("gputopo picked %v, want %v", names, want)
	}
	if up := deviceNames(got.upstream); !slices.Equal(up, []string{"gpu-0", "gpu-1"}) {
		t.Errorf("upstream picked %v, want first-fit gpu-0,gpu-1", up)
	}
}

// placeable reports whether a claim for one partition of any of the
// "|"-separated profiles would fit now, with upstream's allocator as judge.
func placeable(t *testing.T, sl []*resourceapi.ResourceSlice, state *AllocatedState, profiles string) bool {
	t.Helper()
	for _, p := range strings.Split(profiles, "|") {
		if placeableOne(t, sl, state, p) {
			return true
		}
	}
	return false
}

func placeableOne(t *testing.T, sl []*resourceapi.ResourceSlice, state *AllocatedState, profile string) bool {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	a, err := structured.NewAllocator(ctx, DefaultFeatures(), *state, testClasses, sl, cel.NewCache(10, cel.Features{}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Allocate(ctx, node(*sl[0].Spec.NodeName), []*resourceapi.ResourceClaim{migClaim("probe", profile)})
	if err != nil {
		t.Fatal(err)
	}
	return res != nil
}

func migClaim(name, profile string) *resourceapi.ResourceClaim {
	return claimOf(name, exact("mig", migClass.Name, 1, `device.attributes["gpu.nvidia.com"].profile == "`+profile+`"`))
}

// streamLife replays a stream of MIG claims through one allocator and
// returns how many claims were served before the probe profile stopped
// being placeable (len(stream) if it never did) and how many were served.
func streamLife(t *testing.T, sl []*resourceapi.ResourceSlice, stream []string, probe string, ours bool) (life, served int) {
	t.Helper()
	state := emptyState()
	life = -1
	for i, p := range stream {
		got := allocateBoth(t, sl, state, migClaim("c", p))
		res := got.upstream
		if ours && got.ours != nil {
			res = got.ours.Allocations
		}
		if res != nil {
			served++
			commit(state, res)
		}
		if life < 0 && !placeable(t, sl, state, probe) {
			life = i
		}
	}
	if life < 0 {
		life = len(stream)
	}
	return life, served
}

func TestQualityMIGKeepsLargeProfilesPlaceable(t *testing.T) {
	sl := migNode("node-m", 1)
	tests := []struct {
		name   string
		stream []string
		probe  string
		// longer: gputopo must keep the probe placeable strictly longer.
		longer bool
		// skipProbe: only check claims served, the probe is a known
		// trade-off on this stream (see docs/allocator.md).
		skipProbe bool
	}{
		{name: "1g stream keeps a 4g placeable", stream: []string{"1g.10gb", "1g.10gb", "1g.10gb"}, probe: "4g.40gb", longer: true},
		{name: "1g.20gb then 2g keeps a 4g placeable", stream: []string{"1g.20gb", "2g.20gb"}, probe: "4g.40gb", longer: true},
		{name: "mixed 1g/2g/3g stream keeps a 4g placeable", stream: []string{"3g.40gb", "1g.10gb", "2g.20gb", "1g.10gb"}, probe: "4g.40gb", longer: true},
		{name: "mixed stream keeps a 4g or 3g at least as long", stream: []string{"2g.20gb", "1g.10gb", "2g.20gb", "1g.20gb", "1g.10gb", "1g.10gb"}, probe: "4g.40gb|3g.40gb"},
		{name: "2g stream keeps a 4g or 3g at least as long", stream: []string{"2g.20gb", "2g.20gb", "1g.10gb"}, probe: "4g.40gb|3g.40gb"},
		{name: "1g.20gb stream keeps a 4g or 3g at least as long", stream: []string{"1g.20gb", "1g.20gb", "2g.20gb", "1g.10gb", "1g.10gb"}, probe: "4g.40gb|3g.40gb"},
		{name: "3g then small keeps a 4g or 3g at least as long", stream: []string{"3g.40gb", "1g.10gb", "2g.20gb", "1g.10gb"}, probe: "4g.40gb|3g.40gb"},
		{name: "pure 1g stream: 4g kept, right-half 3g lost one claim earlier", stream: []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}, probe: "4g.40gb|3g.40gb", skipProbe: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ourLife, ourServed := streamLife(t, sl, tc.stream, tc.probe, true)
			upLife, upServed := streamLife(t, sl, tc.stream, tc.probe, false)
			t.Logf("%s placeable for %d claims with gputopo (served %d), %d with first-fit (served %d)", tc.probe, ourLife, ourServed, upLife, upServed)
			if ourServed < upServed {
				t.Errorf("gputopo served %d claims, first-fit %d", ourServed, upServed)
			}
			if tc.skipProbe {
				return
			}
			if ourLife < upLife {
				t.Errorf("gputopo lost the %s after %d claims, first-fit after %d", tc.probe, ourLife, upLife)
			}
			if tc.longer && ourLife <= upLife {
				t.Errorf("gputopo should keep the %s placeable longer than first-fit (%d vs %d)", tc.probe, ourLife, upLife)
			}
		})
	}
}

// After two 1g claims, first-fit can no longer place a 4g and refuses it;
// gputopo kept the left half free and serves it.
func TestQualityMIGServesLargeProfileFirstFitRefuses(t *testing.T) {
	sl := migNode("node-m", 1)
	stream := []string{"1g.10gb", "1g.10gb", "4g.40gb"}
	_, ourServed := streamLife(t, sl, stream, "7g.80gb", true)
	_, upServed := streamLife(t, sl, stream, "7g.80gb", false)
	if ourServed != 3 || upServed != 2 {
		t.Errorf("served: gputopo %d (want 3), first-fit %d (want 2)", ourServed, upServed)
	}
}

func TestQualityMIGPrefersBrokenGPU(t *testing.T) {
	sl := migNode("node-m", 2)
	state := emptyState()
	// GPU 1 already holds a 1g: the next 1g goes there too, keeping GPU 0
	// whole for a full-GPU claim.
	state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-m", "gpu-1-mig-1g.10gb-6"))
	got := allocateBoth(t, sl, state, migClaim("c", "1g.10gb"))
	name := deviceNames(got.ours.Allocations)[0]
	if name[:6] != "gpu-1-" {
		t.Errorf("gputopo put the 1g on %s, want GPU 1", name)
	}
	if up := deviceNames(got.upstream)[0]; up[:6] != "gpu-0-" {
		t.Errorf("upstream put the 1g on %s, expected first-fit GPU 0", up)
	}
	if got.ours.Quality.MIGPlaceable <= 0 || got.ours.Quality.MIGPlaceableBefore < got.ours.Quality.MIGPlaceable {
		t.Errorf("quality %v: placeability must be reported and not grow", got.ours.Quality)
	}
}

func sharedClaim(name, mem string) *resourceapi.ResourceClaim {
	r := exact("share", sharedClass.Name, 1)
	r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)}}
	return claimOf(name, r)
}

func TestQualitySharedPacking(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{sharedNode("node-sh", 2)}
	state := emptyState()
	// gpu-1 already half used; a 40Gi share fits exactly there. First-fit
	// breaks the untouched gpu-0 instead.
	commit(state, []resourceapi.AllocationResult{{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "share", Driver: drvNVIDIA, Pool: "node-sh", Device: "gpu-1", ShareID: ptr.To(types.UID("s1")),
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("40Gi")},
	}}}}})
	got := allocateBoth(t, sl, state, sharedClaim("c", "40Gi"))
	if d := deviceNames(got.ours.Allocations); d[0] != "gpu-1" {
		t.Errorf("gputopo picked %v, want gpu-1", d)
	}
	if d := deviceNames(got.upstream); d[0] != "gpu-0" {
		t.Errorf("upstream picked %v, want first-fit gpu-0", d)
	}
	if q := got.ours.Quality; q.Fragmentation > q.FragmentationBefore {
		t.Errorf("fragmentation grew: %v", q)
	}
	// Rounding: 10.5Gi is rounded up to 11Gi by the request policy.
	got = allocateBoth(t, sl, state, sharedClaim("c", "10.5Gi"))
	if c := got.ours.Allocations[0].Devices.Results[0].ConsumedCapacity["memory"]; c.Cmp(resource.MustParse("11Gi")) != 0 {
		t.Errorf("consumed %s, want 11Gi", c.String())
	}
}

// TestQualityStrandedByHost: the node's CPU and memory change how a
// share is rated, not which GPU it gets. With CPU for the workload's
// classes left after the pod, fragmentation grows only by the share's
// leftover; when the pod takes the last CPU the classes need, the node's
// remaining free GPU counts as stranded.
func TestQualityStrandedByHost(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{sharedNode("node-sh", 2)}
	_, ctx := ktesting.NewTestContext(t)
	f := DefaultFeatures()
	pol := DefaultPolicy()
	pol.Workload = topology.Workload{{GPUs: 1, Share: 0.5, Weight: 1, CPUMilli: 4000, MemoryMiB: 8192}}
	e, err := New(Options{Features: f, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	pod := topology.Host{CPUMilli: 8000, MemoryMiB: 16384}
	tests := []struct {
		name          string
		host          *HostUse
		before, after float64 // fragmentation in GPUs
	}{
		// A 40Gi share leaves half of one GPU, usable by the class.
		{"host not counted", nil, 0, 0},
		{"CPU to spare", &HostUse{Free: topology.Host{CPUMilli: 64000, MemoryMiB: 262144}, Pod: pod}, 0, 0},
		// 10 cores before, 2 after: 1.5 GPUs' worth stranded.
		{"last CPU taken", &HostUse{Free: topology.Host{CPUMilli: 10000, MemoryMiB: 262144}, Pod: pod}, 0, 1.5},
		{"memory already short", &HostUse{Free: topology.Host{CPUMilli: 64000, MemoryMiB: 4096}, Pod: topology.Host{}}, 2, 1.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.NewSession(NewInventory(sl, f), testClasses, emptyState(), []*resourceapi.ResourceClaim{sharedClaim("c", "40Gi")}).Allocate(ctx, node("node-sh"), tc.host)
			if err != nil {
				t.Fatal(err)
			}
			q := res.Quality
			if d := deviceNames(res.Allocations); d[0] != "gpu-0" {
				t.Errorf("picked %v, want gpu-0 whatever the host", d)
			}
			if math.Abs(q.FragmentationBefore-tc.before) > 1e-9 || math.Abs(q.Fragmentation-tc.after) > 1e-9 {
				t.Errorf("fragmentation %.3f -> %.3f, want %.3f -> %.3f", q.FragmentationBefore, q.Fragmentation, tc.before, tc.after)
			}
		})
	}
}

// TestQualityRequestClass: the allocation says what it took, for the
// plugin's workload learner; a session without claims measures the
// node with the pod's CPU only, and WithWorkload replaces the policy's
// workload for the measure.
func TestQualityRequestClass(t *testing.T) {
	ctx, e, inv := sharedNodeEngine(t)
	pod := topology.Host{CPUMilli: 8000, MemoryMiB: 16384}
	host := &HostUse{Free: topology.Host{CPUMilli: 10000, MemoryMiB: 262144}, Pod: pod}
	res, err := e.NewSession(inv, testClasses, emptyState(), []*resourceapi.ResourceClaim{sharedClaim("c", "40Gi")}).Allocate(ctx, node("node-sh"), host)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Quality.Request, (topology.TaskClass{GPUs: 1, Share: 0.5, Weight: 1, CPUMilli: 8000, MemoryMiB: 16384}); got != want {
		t.Errorf("request %+v, want %+v (40Gi of an 80Gi GPU)", got, want)
	}

	w := topology.Workload{{GPUs: 1, Share: 1, Weight: 1, CPUMilli: 4000}}
	res, err = e.NewSession(inv, testClasses, emptyState(), nil).WithWorkload(w).Allocate(ctx, node("node-sh"), host)
	if err != nil {
		t.Fatal(err)
	}
	q := res.Quality
	if len(res.Allocations) != 0 || q.Request.GPUs != 0 {
		t.Errorf("no claims: allocations %v, request %+v; want none", res.Allocations, q.Request)
	}
	// 10 cores before: both free GPUs usable by the class; 2 after: stranded.
	if q.FragmentationBefore != 0 || q.Fragmentation != 2 {
		t.Errorf("fragmentation %.3f -> %.3f, want 0 -> 2 (the pod takes the CPU the class needs)", q.FragmentationBefore, q.Fragmentation)
	}
}

// sharedNodeEngine is an engine with the default features and policy and
// the inventory of node-sh, two shared GPUs of 80Gi.
func sharedNodeEngine(t *testing.T) (context.Context, *Engine, *Inventory) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := DefaultFeatures()
	e, err := New(Options{Features: f, Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, e, NewInventory([]*resourceapi.ResourceSlice{sharedNode("node-sh", 2)}, f)
}

// TestQualityContention: the GPUs a claim takes where other requests
// will miss them add, times the contention, to the packing cost; a pod
// without devices takes none.
func TestQualityContention(t *testing.T) {
	ctx, e, inv := sharedNodeEngine(t)
	cost := func(contention float64, claims ...*resourceapi.ResourceClaim) float64 {
		host := &HostUse{Free: topology.Host{CPUMilli: 64000, MemoryMiB: 262144}, Contention: contention}
		res, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(ctx, node("node-sh"), host)
		if err != nil {
			t.Fatal(err)
		}
		return res.Quality.PackingCost
	}
	// 40Gi of an 80Gi GPU: half a GPU, at 0.6.
	if got := cost(0.6, sharedClaim("c", "40Gi")) - cost(0, sharedClaim("c", "40Gi")); math.Abs(got-0.3) > 1e-9 {
		t.Errorf("half a GPU at contention 0.6: cost %v more, want 0.3", got)
	}
	if got := cost(0.6) - cost(0); got != 0 {
		t.Errorf("no devices at contention 0.6: cost %v more, want 0", got)
	}
}

// TestQualityHostPressure: a pod without devices, or with a share of one
// GPU, is rated by the room its CPU and memory take from the node's free
// GPUs beyond the GPU it takes (weighted into the packing cost); a pod
// with whole GPUs is not (fragmentation's classes rate it), and a node
// excluded for a share of the requests loses all its free GPUs to that
// share.
func TestQualityHostPressure(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{sharedNode("node-sh", 2)}
	_, ctx := ktesting.NewTestContext(t)
	f := DefaultFeatures()
	pol := DefaultPolicy()
	pol.Workload = topology.Workload{{GPUs: 1, Share: 1, Weight: 1}}
	pol.HostPressure = 0.5
	e, err := New(Options{Features: f, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	// 16 of 64 free cores: a quarter, next to 2 free GPUs.
	host := &HostUse{Free: topology.Host{CPUMilli: 64000, MemoryMiB: 262144}, Pod: topology.Host{CPUMilli: 16000, MemoryMiB: 1024}}
	res, err := e.NewSession(NewInventory(sl, f), testClasses, emptyState(), nil).Allocate(ctx, node("node-sh"), host)
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Quality; math.Abs(q.HostPressure-0.5) > 1e-9 || math.Abs(q.PackingCost-0.25) > 1e-9 {
		t.Errorf("no devices: host pressure %v, packing cost %v; want 0.5 (2 GPUs x 1/4) and 0.25 (weight 0.5)", q.HostPressure, q.PackingCost)
	}
	if s := res.Quality.PackingScore(); math.Abs(s-37.5) > 1e-9 {
		t.Errorf("packing score %v, want 37.5", s)
	}
	// Half of an 80Gi GPU is a quarter of the 2 free GPUs; 32 of 64 cores
	// is half the CPU: a quarter too much, next to 1.5 GPUs left.
	heavy := &HostUse{Free: host.Free, Pod: topology.Host{CPUMilli: 32000, MemoryMiB: 1024}}
	res, err = e.NewSession(NewInventory(sl, f), testClasses, emptyState(), []*resourceapi.ResourceClaim{sharedClaim("c", "40Gi")}).Allocate(ctx, node("node-sh"), heavy)
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Quality; math.Abs(q.HostPressure-0.375) > 1e-9 {
		t.Errorf("a share with CPU out of proportion: host pressure %v, want 0.375", q.HostPressure)
	}
	res, err = e.NewSession(NewInventory(sl, f), testClasses, emptyState(), []*resourceapi.ResourceClaim{sharedClaim("c", "80Gi")}).Allocate(ctx, node("node-sh"), heavy)
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Quality; q.HostPressure != 0 {
		t.Errorf("a whole GPU: host pressure %v, want 0 (fragmentation's classes rate it)", q.HostPressure)
	}

	// Exclusive whole GPUs count as free GPUs too: 8 on an NVLink-pair
	// node, a quarter of the CPU: 2 GPUs' worth, weighted 0.5.
	pairs := []*resourceapi.ResourceSlice{pairNode("node-pairs")}
	res, err = e.NewSession(NewInventory(pairs, f), testClasses, emptyState(), nil).Allocate(ctx, node("node-pairs"), host)
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Quality; math.Abs(q.HostPressure-2) > 1e-9 || math.Abs(q.PackingCost-1) > 1e-9 {
		t.Errorf("exclusive GPUs: host pressure %v, packing cost %v; want 2 and 1", q.HostPressure, q.PackingCost)
	}

	excluded := *host
	excluded.Excluded = 0.25
	res, err = e.NewSession(NewInventory(sl, f), testClasses, emptyState(), nil).Allocate(ctx, node("node-sh"), &excluded)
	if err != nil {
		t.Fatal(err)
	}
	// A quarter of the requests may not run here: 2 free GPUs x 1/4.
	if q := res.Quality; math.Abs(q.Fragmentation-0.5) > 1e-9 || math.Abs(q.FragmentationBefore-0.5) > 1e-9 {
		t.Errorf("excluded 1/4: fragmentation %v -> %v, want 0.5 -> 0.5", q.FragmentationBefore, q.Fragmentation)
	}
}

func TestPolicyRejectsBadHostPressure(t *testing.T) {
	for _, v := range []float64{-0.1, math.NaN(), math.Inf(1), 1e300} {
		pol := DefaultPolicy()
		pol.HostPressure = v
		if _, err := New(Options{Features: DefaultFeatures(), Policy: pol}); err == nil || !strings.Contains(err.Error(), "policy.hostPressure") {
			t.Errorf("hostPressure %v: error %v, want one naming policy.hostPressure", v, err)
		}
	}
}

// Whole GPUs count in fragmentation as free or not; a claim of several
// GPUs below the best link class its node offers that many pays
// LinkClassCost per class in PackingCost, so that across nodes packing
// does not outweigh links (docs/scheduler.md).
func TestQualityWholeGPUPacking(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{pairNode("node-a")}
	_, ctx := ktesting.NewTestContext(t)
	f := DefaultFeatures()
	tests := []struct {
		name               string
		workload           topology.Workload
		held               []string
		count              int64
		wantBefore, wantFr float64
		wantSteps          int
		wantCost           float64
	}{
		{name: "an 8-GPU class strands the 7 GPUs a 1-GPU claim leaves", workload: topology.Workload{{GPUs: 8, Share: 1, Weight: 1}},
			count: 1, wantBefore: 0, wantFr: 7, wantCost: 7},
		{name: "a 2-GPU claim on a free NVLink pair", workload: topology.Workload{{GPUs: 1, Share: 1, Weight: 1}},
			count: 2, wantCost: 0},
		// gpu-5 (pair 1, NUMA 0) and gpu-7 (pair 3, NUMA 1) are left: the
		// system link, 4 classes below the node's NVLink pairs.
		{name: "a 2-GPU claim across sockets", workload: topology.Workload{{GPUs: 1, Share: 1, Weight: 1}},
			held: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-6"}, count: 2, wantSteps: 4, wantCost: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := DefaultPolicy()
			pol.Workload = tc.workload
			pol.LinkClassCost = 0.5
			e, err := New(Options{Features: f, Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			state := emptyState()
			for _, h := range tc.held {
				state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", h))
			}
			claims := []*resourceapi.ResourceClaim{claimOf("c", exact("gpus", gpuClass.Name, tc.count))}
			res, err := e.NewSession(NewInventory(sl, f), testClasses, state, claims).Allocate(ctx, node("node-a"), nil)
			if err != nil {
				t.Fatal(err)
			}
			q := res.Quality
			if math.Abs(q.FragmentationBefore-tc.wantBefore) > 1e-9 || math.Abs(q.Fragmentation-tc.wantFr) > 1e-9 {
				t.Errorf("fragmentation %v -> %v, want %v -> %v", q.FragmentationBefore, q.Fragmentation, tc.wantBefore, tc.wantFr)
			}
			if q.LinkSteps != tc.wantSteps || math.Abs(q.PackingCost-tc.wantCost) > 1e-9 {
				t.Errorf("link steps %d, packing cost %v; want %d and %v (devices %v)", q.LinkSteps, q.PackingCost, tc.wantSteps, tc.wantCost, deviceNames(res.Allocations))
			}
		})
	}
}

func TestPolicyRejectsBadLinkClassCost(t *testing.T) {
	for _, v := range []float64{-1, math.NaN(), math.Inf(-1), 1e300} {
		pol := DefaultPolicy()
		pol.LinkClassCost = v
		if _, err := New(Options{Features: DefaultFeatures(), Policy: pol}); err == nil || !strings.Contains(err.Error(), "policy.linkClassCost") {
			t.Errorf("linkClassCost %v: error %v, want one naming policy.linkClassCost", v, err)
		}
	}
}

// An extended-resource claim (a pod asking nvidia.com/gpu in several
// containers) is scored by each container's GPUs, which are all the
// container sees: two containers of 2 GPUs each get an NVLink pair each
// where two pairs are free, not four GPUs close as a whole. A claim of
// the same requests written by a user, whose containers may share every
// device, is scored as a whole. Both go through one engine, the user's
// claim first: the solution memo must tell the two apart.
func TestQualityExtendedClaimLinksPerContainer(t *testing.T) {
	var gpus []gpu
	for i := range 8 {
		gpus = append(gpus, gpu{nvlink: fmt.Sprintf("pair-%d", i/2), numa: int64(i / 4), pcie: fmt.Sprintf("pci0000:%02x", i/2), product: "NVIDIA H100 NVL"})
	}
	sl := []*resourceapi.ResourceSlice{gpuSlice("node-a", gpus)}
	state := emptyState()
	for _, held := range []string{"gpu-0", "gpu-5"} {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", held))
	}
	f := DefaultFeatures()
	e, err := New(Options{Features: f, Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory(sl, f)
	_, ctx := ktesting.NewTestContext(t)
	allocate := func(extended bool) *Result {
		c := claimOf("pod-extended-resources", exact("container-0-request-0", gpuClass.Name, 2), exact("container-1-request-0", gpuClass.Name, 2))
		if extended {
			c.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
		}
		res, err := e.NewSession(inv, testClasses, state, []*resourceapi.ResourceClaim{c}).Allocate(ctx, node("node-a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The user's claim: as a whole, the four GPUs leave the most intact
	// pairs (its containers may share them all).
	names := deviceNames(allocate(false).Allocations)
	slices.Sort(names)
	if want := []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"}; !slices.Equal(names, want) {
		t.Errorf("user's claim: devices %v, want %v (the broken pairs' GPUs and one pair, two pairs left intact)", names, want)
	}
	byRequest := map[string][]topology.GPU{}
	for _, r := range allocate(true).Allocations[0].Devices.Results {
		byRequest[r.Request] = append(byRequest[r.Request], describe(t, sl, r.Device))
	}
	for req, set := range byRequest {
		if link := topology.WorstPair(set); link != topology.LinkNVLink {
			t.Errorf("extended-resource claim: %s got link %s, want an NVLink pair for each container", req, link)
		}
	}
}

// With Packing off, nothing of it is left in PackingCost, which
// GPUConsumable scores: a pick one link class below the node's best
// costs LinkClassCost with Packing on and nothing with it off.
func TestQualityPackingOffCostsNothing(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{pairNode("node-a")}
	state := emptyState()
	for _, held := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"} { // every pair broken
		state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", held))
	}
	_, ctx := ktesting.NewTestContext(t)
	for _, packing := range []bool{true, false} {
		pol := DefaultPolicy()
		pol.Packing.Enabled = packing
		e, err := New(Options{Features: DefaultFeatures(), Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.NewSession(NewInventory(sl, DefaultFeatures()), testClasses, state, []*resourceapi.ResourceClaim{claimOf("tp", exact("gpus", gpuClass.Name, 2))}).Allocate(ctx, node("node-a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Quality.LinkSteps == 0 {
			t.Fatalf("packing %v: no link step below the best (%s), the test needs one", packing, res.Quality)
		}
		if got := res.Quality.PackingCost; packing && got <= 0 || !packing && got != 0 {
			t.Errorf("packing %v: PackingCost %v (link steps %d)", packing, got, res.Quality.LinkSteps)
		}
	}
}

// TestQualityRequestCountsGPUsOnly: the request class a pod's picks make
// counts GPUs and partitions, not the other devices its claims take
// beside them (NVIDIA's compute-domain channel on a GB200 tray, a NIC),
// which would make the learner see a 5-GPU request that fits no 4-GPU
// tray; a device that says nothing of what it is still counts.
func TestQualityRequestCountsGPUsOnly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	channel := localSlice("node-a", "node-a-channels", plainDevice("channel-0", map[string]resourceapi.DeviceAttribute{"type": str("channel"), "id": num(0)}))
	channel.Spec.Driver = "compute-domain.nvidia.com"
	nic := localSlice("node-a", "node-a-nics", plainDevice("nic-0", map[string]resourceapi.DeviceAttribute{"resource.kubernetes.io/pcieRoot": str("pci0000:00")}))
	nic.Spec.Driver = "nic.example.com"
	bare := localSlice("node-a", "node-a-bare", plainDevice("dev-0", nil))
	bare.Spec.Driver = "bare.example.com"
	classes := classList{gpuClass, class("channel", `device.driver == "compute-domain.nvidia.com"`),
		class("nic", `device.driver == "nic.example.com"`), class("bare", `device.driver == "bare.example.com"`)}
	for _, tc := range []struct {
		name  string
		other string
		want  int
	}{
		{"a compute-domain channel", "channel", 2},
		{"a NIC publishing a PCIe root only", "nic", 2},
		{"a device without attributes", "bare", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			inv := NewInventory([]*resourceapi.ResourceSlice{pairNode("node-a"), channel, nic, bare}, DefaultFeatures())
			claims := []*resourceapi.ResourceClaim{claimOf("c", exact("gpus", gpuClass.Name, 2), exact("other", tc.other, 1))}
			res, err := e.NewSession(inv, classes, emptyState(), claims).Allocate(ctx, node("node-a"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Quality.Request.GPUs; got != tc.want {
				t.Errorf("request of 2 GPUs and %s counts %d GPUs, want %d", tc.other, got, tc.want)
			}
		})
	}
}
