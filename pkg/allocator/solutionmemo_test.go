package allocator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// fromTemplate copies claims under new names, as the resourceclaim
// controller creates them for the pods of one template.
func fromTemplate(claims []*resourceapi.ResourceClaim, pod int) []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(claims))
	for i, c := range claims {
		c = c.DeepCopy()
		c.Name = fmt.Sprintf("pod-%d-%s", pod, c.Name)
		c.UID = types.UID(fmt.Sprintf("pod-%d-%s", pod, c.UID))
		out[i] = c
	}
	return out
}

// cloneState copies a ledger, so that a test can add to it while
// sessions read the old one.
func cloneState(state *AllocatedState) *AllocatedState {
	return &AllocatedState{
		AllocatedDevices:         state.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: state.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       state.AggregatedCapacity.Clone(),
	}
}

// TestSolutionMemoRepeatsTheSearch streams pods made from the generated
// problems' claims onto their nodes, each allocation added to the ledger,
// and asks an engine with the memo and one without it at every step: the
// outcome, allocation and quality must be the same. Every pod is asked
// twice, so the memo answers the second time, and the ledger and the
// node's CPU change between pods, so it must notice what changed. A
// third node is a copy of the first under other names, with the first's
// ledger: where the copy keeps the strings, the first node's solutions
// answer for it; where its strings differ (renamed), the selectors that
// read them must tell the two apart. Where nothing fits, the memo's
// message must be the search's, naming this pod's claims.
func TestSolutionMemoRepeatsTheSearch(t *testing.T) {
	problems := 1500
	if testing.Short() {
		problems = 300
	}
	hits, across, failedHits := int64(0), 0, 0
	for seed := range uint64(problems) {
		p := newProblem(seed)
		memo, fresh := newMemoPair(t, p.features)
		renamed := seed%2 == 1
		copies, mirror := copyOfNode(p, "node-0", "node-2", renamed)
		inv := NewInventory(append(slices.Clone(p.slices), copies...), p.features)
		nodes := []*v1.Node{p.node, {ObjectMeta: p.node.ObjectMeta}, {ObjectMeta: p.node.ObjectMeta}}
		nodes[1].Name, nodes[2].Name = "node-1", "node-2"
		state := mirror(p.state)
		for pod := range 6 {
			claims := fromTemplate(p.claims, pod)
			if pod%3 == 2 {
				claims = claims[:1] // another template between
			}
			host := &HostUse{Free: topology.Host{CPUMilli: int64(64000 - 8000*pod), MemoryMiB: 1 << 18}, Pod: topology.Host{CPUMilli: 4000, MemoryMiB: 1 << 14}}
			if pod%2 == 1 {
				host = nil
			}
			var placed *Result
			for _, node := range nodes {
				for ask := range 2 {
					before := memo.memoHits.Load()
					want, wantErr := fresh.NewSession(inv, p.classes, state, claims).Allocate(context.Background(), node, host)
					got, gotErr := memo.NewSession(inv, p.classes, state, claims).Allocate(context.Background(), node, host)
					where := fmt.Sprintf("seed %d, pod %d, %s, ask %d", seed, pod, node.Name, ask)
					if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
						t.Fatalf("%s: without the memo %v, with it %v", where, wantErr, gotErr)
					}
					if wantErr != nil {
						if memo.memoHits.Load() > before {
							failedHits++
						}
						continue
					}
					if node == nodes[2] && ask == 0 && memo.memoHits.Load() > before {
						across++
					}
					if diff := cmp.Diff(withoutShareIDs(want.Allocations), withoutShareIDs(got.Allocations), quantityCmp); diff != "" {
						t.Fatalf("%s: the memo gave another allocation (-search +memo):\n%s", where, diff)
					}
					if diff := cmp.Diff(want.Quality, got.Quality); diff != "" {
						t.Fatalf("%s: the memo gave another quality (-search +memo):\n%s", where, diff)
					}
					if shares(want.Allocations) != shares(got.Allocations) {
						t.Fatalf("%s: %d share IDs with the memo, %d without", where, shares(got.Allocations), shares(want.Allocations))
					}
					if placed == nil && node == nodes[0] {
						placed = got
					}
				}
			}
			if placed != nil {
				state = cloneState(state)
				commit(state, placed.Allocations)
				state = mirror(state)
			}
		}
		hits += memo.memoHits.Load()
	}
	t.Logf("%d answers from the memo, %d of them a copy's first from the original's, %d that nothing fits", hits, across, failedHits)
	if hits == 0 || across == 0 || failedHits == 0 {
		t.Fatalf("the memo answered %d times, %d times across nodes, %d times that nothing fits: the test does not exercise it", hits, across, failedHits)
	}
}

// copyOfNode copies the slices of node from's own pools for node to,
// under other pool and slice names, with every string attribute value
// changed when renamed; mirror adds to a ledger, for every entry of
// from's pools, the same entry for the copy.
func copyOfNode(p *problem, from, to string, renamed bool) (copies []*resourceapi.ResourceSlice, mirror func(*AllocatedState) *AllocatedState) {
	rename := func(name string) string { return strings.Replace(name, from, to, 1) }
	for _, s := range p.slices {
		if ptr.Deref(s.Spec.NodeName, "") != from {
			continue
		}
		c := s.DeepCopy()
		c.Name, c.Spec.Pool.Name, c.Spec.NodeName = rename(c.Name), rename(c.Spec.Pool.Name), ptr.To(to)
		for i := range c.Spec.Devices {
			for name, a := range c.Spec.Devices[i].Attributes {
				if renamed && a.StringValue != nil {
					a.StringValue = ptr.To(*a.StringValue + "-renamed")
					c.Spec.Devices[i].Attributes[name] = a
				}
			}
		}
		copies = append(copies, c)
	}
	copied := func(id structured.DeviceID) (structured.DeviceID, bool) {
		pool := id.Pool.String()
		if !strings.HasPrefix(pool, from+"-") {
			return id, false
		}
		return structured.MakeDeviceID(id.Driver.String(), rename(pool), id.Device.String()), true
	}
	mirror = func(in *AllocatedState) *AllocatedState {
		out := cloneState(in)
		for id := range in.AllocatedDevices {
			if c, ok := copied(id); ok {
				out.AllocatedDevices.Insert(c)
			}
		}
		for sid := range in.AllocatedSharedDeviceIDs {
			if c, ok := copied(sid.GetDeviceID()); ok {
				uid := types.UID(sid.ShareID.String() + "-copy")
				out.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(c, &uid))
			}
		}
		for id, consumed := range in.AggregatedCapacity {
			if c, ok := copied(id); ok {
				out.AggregatedCapacity[c] = consumed
			}
		}
		return out
	}
	return copies, mirror
}

func newMemoPair(t *testing.T, f Features) (memo, fresh *Engine) {
	t.Helper()
	var err error
	if memo, err = New(Options{Features: f, Policy: DefaultPolicy()}); err != nil {
		t.Fatal(err)
	}
	if fresh, err = New(Options{Features: f, Policy: DefaultPolicy()}); err != nil {
		t.Fatal(err)
	}
	fresh.noMemo = true
	return memo, fresh
}

func shares(res []resourceapi.AllocationResult) int {
	n := 0
	for _, a := range res {
		for _, r := range a.Devices.Results {
			if r.ShareID != nil {
				n++
			}
		}
	}
	return n
}

// TestSolutionMemoKeys: each input the search reads, changed alone, is a
// miss; the same inputs in a new session of the same engine are a hit.
func TestSolutionMemoKeys(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{pairNode("n1")}
	classes := classList{class("gpu")}
	claim := claimOf("c", resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}})
	host := &HostUse{Free: topology.Host{CPUMilli: 8000, MemoryMiB: 1 << 16}}
	otherClass := class("gpu", `device.driver == "gpu.nvidia.com"`)
	otherSpec := claim.DeepCopy()
	otherSpec.Spec.Devices.Requests[0].Exactly.Count = 2
	usedState := emptyState()
	usedState.AllocatedDevices.Insert(structured.MakeDeviceID(slices[0].Spec.Driver, slices[0].Spec.Pool.Name, slices[0].Spec.Devices[0].Name))
	otherHost := &HostUse{Free: topology.Host{CPUMilli: 4000, MemoryMiB: 1 << 16}}

	for name, tc := range map[string]struct {
		classes  classList
		state    *AllocatedState
		claim    *resourceapi.ResourceClaim
		host     *HostUse
		workload topology.Workload
		hit      bool
	}{
		"same inputs, another claim name": {claim: fromTemplate([]*resourceapi.ResourceClaim{claim}, 1)[0], hit: true},
		"class changed":                   {classes: classList{otherClass}},
		"device allocated":                {state: usedState},
		"claim asks for more":             {claim: otherSpec},
		"node's CPU changed":              {host: otherHost},
		"no host":                         {host: &HostUse{}},
		"another workload":                {workload: topology.Workload{{GPUs: 2, Share: 1, Weight: 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			inv := NewInventory(slices, DefaultFeatures())
			n := node("n1")
			if _, err := e.NewSession(inv, classes, emptyState(), []*resourceapi.ResourceClaim{claim}).Allocate(context.Background(), n, host); err != nil {
				t.Fatal(err)
			}
			cl, st, c, h := classes, emptyState(), claim, host
			if tc.classes != nil {
				cl = tc.classes
			}
			if tc.state != nil {
				st = tc.state
			}
			if tc.claim != nil {
				c = tc.claim
			}
			if tc.host != nil {
				h = tc.host
				if *h == (HostUse{}) {
					h = nil
				}
			}
			s := e.NewSession(inv, cl, st, []*resourceapi.ResourceClaim{c}).WithWorkload(tc.workload)
			if _, err := s.Allocate(context.Background(), n, h); err != nil {
				t.Fatal(err)
			}
			if hit := e.memoHits.Load() == 1; hit != tc.hit {
				t.Errorf("memo hit: %v, want %v", hit, tc.hit)
			}
		})
	}
}

// TestSolutionMemoCapacityInKey: a shared device's consumed capacity is
// part of the key, by value, whatever the order of its names. An integer
// and a fraction of equal value (1 and 1000m) may key apart: a miss costs
// a search, never a wrong answer.
func TestSolutionMemoCapacityInKey(t *testing.T) {
	s := &Session{shared: map[structured.DeviceID]bool{}}
	id := structured.MakeDeviceID("d", "p", "gpu-0")
	dev := &device{id: id}
	view := &nodeView{pools: []*pool{{devices: []*device{dev}}}, devices: []*device{dev}}
	key := func(consumed ...string) string {
		s.state = &AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
		if len(consumed) > 0 {
			c := map[resourceapi.QualifiedName]resource.Quantity{}
			for i := 0; i+1 < len(consumed); i += 2 {
				c[resourceapi.QualifiedName(consumed[i])] = resource.MustParse(consumed[i+1])
			}
			s.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, c))
		}
		key, _ := s.stateKey(nil, view)
		return string(key)
	}
	for _, tc := range []struct {
		a, b []string
		same bool
	}{
		{[]string{"memory", "8Gi"}, []string{"memory", "16Gi"}, false},
		{nil, []string{"memory", "8Gi"}, false},
		{[]string{"memory", "8Gi"}, []string{"memory", "8Gi"}, true},
		{[]string{"memory", "8Gi"}, []string{"memory", "8589934592"}, true},
		{[]string{"cores", "500m"}, []string{"cores", "0.5"}, true},
		{[]string{"cores", "500m"}, []string{"cores", "501m"}, false},
		{[]string{"cores", "500m", "memory", "1Gi"}, []string{"memory", "1Gi", "cores", "500m"}, true},
		{[]string{"cores", "500m", "memory", "1Gi"}, []string{"cores", "500m", "memory", "2Gi"}, false},
		{[]string{"cores", "1", "memory", "1Gi"}, []string{"cores", "1Gi", "memory", "1"}, false},
	} {
		// The key is the same whether the device declares the names
		// consumed (looked up), none of them or only some (ranged over).
		for _, declared := range [][]resourceapi.QualifiedName{nil, {"memory"}, {"cores", "memory"}} {
			dev.capNames = declared
			if a, b := key(tc.a...), key(tc.b...); (a == b) != tc.same {
				t.Errorf("capacities %v, consumed %v and %v: keys %q and %q, want the same: %v", declared, tc.a, tc.b, a, b, tc.same)
			}
			dev.capNames = nil
			undeclared := key(tc.a...)
			dev.capNames = declared
			if got := key(tc.a...); got != undeclared {
				t.Errorf("capacities %v, consumed %v: key %q, but %q when the device declares none", declared, tc.a, got, undeclared)
			}
		}
	}
}

// TestSeedLedgerAgreesWithLookups: the flags stateKey gives the search
// say what its own ledger lookups would, for every combination of
// entries, legacy or not.
func TestSeedLedgerAgreesWithLookups(t *testing.T) {
	id := structured.MakeDeviceID("d", "p", "gpu-0")
	dev := &device{id: id}
	view := &nodeView{pools: []*pool{{devices: []*device{dev}}}, devices: []*device{dev}}
	share := types.UID("share")
	for combo := range 8 {
		for _, legacy := range []bool{false, true} {
			state := emptyState()
			if combo&1 != 0 {
				state.AllocatedDevices.Insert(id)
			}
			if combo&2 != 0 {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &share))
			}
			if combo&4 != 0 {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}))
			}
			s := &Session{state: state, legacy: legacy}
			if !legacy && combo&2 != 0 {
				s.shared = map[structured.DeviceID]bool{id: true}
			}
			looked := &run{s: s, view: view, exclusive: make([]int8, 1), holding: make([]int8, 1)}
			seeded := &run{s: s, view: view, exclusive: make([]int8, 1), holding: make([]int8, 1)}
			_, flags := s.stateKey(nil, view)
			seeded.seedLedger(flags)
			if a, b := looked.ledgerExclusive(0), seeded.ledgerExclusive(0); a != b {
				t.Errorf("entries %03b, legacy %v: exclusive looked up %v, seeded %v", combo, legacy, a, b)
			}
			if a, b := looked.ledgerHolds(0), seeded.ledgerHolds(0); a != b {
				t.Errorf("entries %03b, legacy %v: holds looked up %v, seeded %v", combo, legacy, a, b)
			}
		}
	}
}

// TestSolutionMemoSkipsCutSearches: a search that ends past its deadline
// may have been cut short, so its solution is not remembered; a done
// context gets the search's error, not a remembered answer.
func TestSolutionMemoSkipsCutSearches(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{pairNode("n1")}
	claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 2))}
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory(slices, DefaultFeatures())
	late := WithDeadline(context.Background(), time.Now().Add(-time.Second))
	if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(late, node("n1"), nil); err != nil {
		t.Logf("past the deadline: %v", err)
	}
	if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("n1"), nil); err != nil {
		t.Fatal(err)
	}
	if n := e.memoHits.Load(); n != 0 {
		t.Fatalf("a search past its deadline was remembered: %d hits", n)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(done, node("n1"), nil); err == nil {
		t.Fatal("a done context got an allocation")
	}
	if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("n1"), nil); err != nil {
		t.Fatal(err)
	}
	if n := e.memoHits.Load(); n != 1 {
		t.Fatalf("memo hits: %d, want 1 (the completed search's)", n)
	}
}

// TestSolutionMemoAcrossNodes: two nodes of one model, each GPU with its
// own UUID, share solutions unless a selector tells their devices apart;
// the answer then names the second node's own device.
func TestSolutionMemoAcrossNodes(t *testing.T) {
	withUUIDs := func(node string) *resourceapi.ResourceSlice {
		s := pairNode(node)
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))}
		}
		return s
	}
	uuid := `device.attributes["gpu.nvidia.com"].uuid`
	for name, tc := range map[string]struct {
		selector   string
		hit        bool
		wantDevice string // on n2; "" for any
	}{
		"no selector":                          {hit: true},
		"a selector that reads the model":      {selector: `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 NVL"`, hit: true},
		"a selector picking GPU 3 by its UUID": {selector: uuid + `.endsWith("-3")`, hit: true, wantDevice: "gpu-3"},
		"selectors picking other GPUs":         {selector: uuid + ` == "GPU-n1-3" || ` + uuid + ` == "GPU-n2-5"`, wantDevice: "gpu-5"},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			inv := NewInventory([]*resourceapi.ResourceSlice{withUUIDs("n1"), withUUIDs("n2")}, DefaultFeatures())
			var selectors []string
			if tc.selector != "" {
				selectors = append(selectors, tc.selector)
			}
			claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1, selectors...))}
			if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("n1"), nil); err != nil {
				t.Fatal(err)
			}
			res, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("n2"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if hit := e.memoHits.Load() == 1; hit != tc.hit {
				t.Errorf("memo hit: %v, want %v", hit, tc.hit)
			}
			got := res.Allocations[0].Devices.Results[0]
			if got.Pool != "n2" || (tc.wantDevice != "" && got.Device != tc.wantDevice) {
				t.Errorf("allocated %s/%s, want a device of pool n2 %s", got.Pool, got.Device, tc.wantDevice)
			}
		})
	}
}

// TestSolutionMemoSurvivesRefresh: the scheduler refreshes its inventory
// whenever a slice changes; solutions of nodes whose devices did not
// change still answer, and a node whose devices changed is searched.
func TestSolutionMemoSurvivesRefresh(t *testing.T) {
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 2))}
	allocate := func(inv *Inventory) *Result {
		t.Helper()
		res, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("n1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	inv := NewInventory([]*resourceapi.ResourceSlice{pairNode("n1")}, DefaultFeatures())
	allocate(inv)
	allocate(inv.Refresh([]*resourceapi.ResourceSlice{pairNode("n1")}))
	if n := e.memoHits.Load(); n != 1 {
		t.Fatalf("memo hits after a refresh with the same devices: %d, want 1", n)
	}
	res := allocate(inv.Refresh([]*resourceapi.ResourceSlice{nvswitchNode("n1")}))
	if n := e.memoHits.Load(); n != 1 {
		t.Fatalf("memo hits after the node's devices changed: %d, want still 1", n)
	}
	if res.Quality.WorstLink != topology.LinkNVLink {
		t.Errorf("on the new NVSwitch board the pair is on %v, want nvlink", res.Quality.WorstLink)
	}
}

// TestSolutionMemoCountersInShape: nodes whose devices consume the same
// counters by name are told apart when their counter sets are listed in
// another order or their amounts convert to another unit (amounts.go):
// two devices fit on the second node and not on the first, which must
// not get the second's solution.
func TestSolutionMemoCountersInShape(t *testing.T) {
	counterNode := func(node string, sets ...resourceapi.CounterSet) []*resourceapi.ResourceSlice {
		pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
		devices := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
			Spec:       resourceapi.ResourceSliceSpec{Driver: drvNVIDIA, NodeName: ptr.To(node), Pool: pool},
		}
		for i := range 2 {
			devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{
				Name:       fmt.Sprintf("part-%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("gpu")}},
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
					CounterSet: "s1", Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse("1")}},
				}},
			})
		}
		counters := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
			Spec:       resourceapi.ResourceSliceSpec{Driver: drvNVIDIA, NodeName: ptr.To(node), Pool: pool, SharedCounters: sets},
		}
		return []*resourceapi.ResourceSlice{devices, counters}
	}
	set := func(name, mem string) resourceapi.CounterSet {
		return resourceapi.CounterSet{Name: name, Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse(mem)}}}
	}
	for name, tc := range map[string]struct{ tight, roomy []resourceapi.CounterSet }{
		"counter sets in another order": {tight: []resourceapi.CounterSet{set("s1", "1"), set("s2", "2")}, roomy: []resourceapi.CounterSet{set("s2", "1"), set("s1", "2")}},
		"amounts in another unit":       {tight: []resourceapi.CounterSet{set("s1", "1.5")}, roomy: []resourceapi.CounterSet{set("s1", "15")}},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			inv := NewInventory(append(counterNode("roomy", tc.roomy...), counterNode("tight", tc.tight...)...), DefaultFeatures())
			claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 2))}
			if _, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("roomy"), nil); err != nil {
				t.Fatalf("roomy node: %v", err)
			}
			res, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(context.Background(), node("tight"), nil)
			if err == nil {
				t.Fatalf("tight node: allocated %v, want no room for two devices", res.Allocations[0].Devices.Results)
			}
			if n := e.memoHits.Load(); n != 0 {
				t.Errorf("memo hits: %d, want 0", n)
			}
		})
	}
}
