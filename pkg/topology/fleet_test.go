package topology

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Builders of fleets for SummarizeFleet.

// gpuNode publishes n whole GPUs on node, GPU i with the attributes
// extra(i) adds (nil: none) besides type and uuid "<node>-<i>".
func gpuNode(node string, n int, extra func(i int) []any) *resourceapi.ResourceSlice {
	devices := map[string][]any{}
	for i := range n {
		kv := gpuAttrs(fmt.Sprintf("%s-%d", node, i), "")
		if extra != nil {
			kv = append(kv, extra(i)...)
		}
		devices[fmt.Sprintf("gpu-%d", i)] = kv
	}
	return tray(node, 1, devices)
}

func domain(d string) func(int) []any { return func(int) []any { return []any{"nvlinkDomain", d} } }

// a100Placements are the MIG partitions of a GPU with 7 compute and 8
// memory slices: profile, compute slices, memory slices, starts.
var a100Placements = []struct {
	profile         string
	compute, memory int
	starts          []int
}{
	{"1g.10gb", 1, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	{"2g.20gb", 2, 2, []int{0, 2, 4}},
	{"3g.40gb", 3, 4, []int{0, 4}},
	{"4g.40gb", 4, 4, []int{0}},
	{"7g.80gb", 7, 8, []int{0}},
}

func counters(compute, start, size int) map[string]resourceapi.Counter {
	c := map[string]resourceapi.Counter{"compute": {Value: *resource.NewQuantity(int64(compute), resource.DecimalSI)}}
	for m := start; m < start+size; m++ {
		c[fmt.Sprintf("memory%d", m)] = resourceapi.Counter{Value: *resource.NewQuantity(1, resource.DecimalSI)}
	}
	return c
}

// migNode publishes one MIG GPU on node as the node agent does: a slice
// with its counter set, a slice with the whole GPU (consuming every
// counter) and every placement.
func migNode(node string) []*resourceapi.ResourceSlice {
	set := "gpu-0"
	pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
	counterSlice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: testDriver, NodeName: ptr.To(node), Pool: pool,
		SharedCounters: []resourceapi.CounterSet{{Name: set, Counters: counters(7, 0, 8)}},
	}}
	uuid := node + "-0"
	devices := []resourceapi.Device{{
		Name: "gpu-0", Attributes: attrs(gpuAttrs(uuid, "")...),
		ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: counters(7, 0, 8)}},
	}}
	for _, p := range a100Placements {
		for _, start := range p.starts {
			devices = append(devices, resourceapi.Device{
				Name:             migName(p.profile, start),
				Attributes:       attrs("type", "mig", "parentUUID", uuid, "profile", p.profile),
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: counters(p.compute, start, p.memory)}},
			})
		}
	}
	deviceSlice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: testDriver, NodeName: ptr.To(node), Pool: pool, Devices: devices,
	}}
	return []*resourceapi.ResourceSlice{counterSlice, deviceSlice}
}

func migName(profile string, start int) string {
	return fmt.Sprintf("gpu-0-mig-%s-%d", profile, start)
}

// sharedNode publishes one GPU that shares: 80Gi of memory.
func sharedNode(node string) *resourceapi.ResourceSlice {
	s := gpuNode(node, 1, nil)
	s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	s.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}
	return s
}

// tainted gives the named devices of s a taint with the effect given.
func tainted(s *resourceapi.ResourceSlice, effects map[string]resourceapi.DeviceTaintEffect) *resourceapi.ResourceSlice {
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		if e, ok := effects[d.Name]; ok {
			d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "example.com/unhealthy", Effect: e})
		}
	}
	return s
}

// uses is what a test allocates: "pool/device" -> use.
type uses map[string]DeviceUse

func (u uses) usage(driver, pool, device string) DeviceUse { return u[pool+"/"+device] }

func exclusive(devices ...string) uses {
	u := uses{}
	for _, d := range devices {
		u[d] = DeviceUse{Exclusive: true}
	}
	return u
}

func shares(memory string) DeviceUse {
	q := resource.MustParse(memory)
	return DeviceUse{Shared: true, Consumed: map[resourceapi.QualifiedName]*resource.Quantity{"memory": &q}}
}

// noMIG is the MIGPlaceable of a fleet without partitions.
var noMIG = map[string]int{}

// migFree is MIGPlaceable of one empty MIG GPU.
func migFree() map[string]int {
	return map[string]int{"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
}

func TestSummarizeFleet(t *testing.T) {
	nvswitch := func(int) []any { return []any{"productName", "NVIDIA H100 80GB HBM3"} }
	pairs := func(i int) []any { return []any{"nvlinkDomain", fmt.Sprintf("pair-%d", i/2)} }
	rack := func(clique string) func(int) []any {
		return func(int) []any { return []any{"nvlinkDomain", "tray", "cliqueID", clique} }
	}
	tests := []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		used   uses
		// nodeCliques: the nodes' clique labels.
		nodeCliques map[string]string
		want        FleetSummary
	}{{
		name: "empty fleet",
		want: FleetSummary{MIGPlaceable: noMIG},
	}, {
		name:   "NVSwitch node with two GPUs taken: the six free ones are stranded",
		slices: []*resourceapi.ResourceSlice{gpuNode("n0", 8, nvswitch)},
		used:   exclusive("n0/gpu-0", "n0/gpu-5"),
		want:   FleetSummary{GPUs: 8, Free: 6, Used: 2, Stranded: 6, NVLinkDomains: 1, MIGPlaceable: noMIG},
	}, {
		name:   "NVLink pairs: only the broken pair strands its free GPU",
		slices: []*resourceapi.ResourceSlice{gpuNode("n0", 4, pairs), gpuNode("n1", 4, pairs)},
		used:   exclusive("n0/gpu-0"),
		want:   FleetSummary{GPUs: 8, Free: 7, Used: 1, Stranded: 1, NVLinkDomains: 4, FreeNVLinkDomains: 3, MIGPlaceable: noMIG},
	}, {
		name:   "PCIe node: GPUs in no NVLink domain are one group per node",
		slices: []*resourceapi.ResourceSlice{gpuNode("n0", 4, nil), gpuNode("n1", 2, nil)},
		used:   exclusive("n0/gpu-3"),
		want:   FleetSummary{GPUs: 6, Free: 5, Used: 1, Stranded: 3, MIGPlaceable: noMIG},
	}, {
		name:   "free MIG GPU: every profile placeable as often as the GPU holds it",
		slices: migNode("m0"),
		want:   FleetSummary{GPUs: 1, Free: 1, MIGPlaceable: migFree()},
	}, {
		name:   "3g.40gb at 0: the other half stays placeable, the GPU is partly used",
		slices: migNode("m0"),
		used:   exclusive("m0/" + migName("3g.40gb", 0)),
		want: FleetSummary{GPUs: 1, Partial: 1, MIGPlaceable: map[string]int{
			"1g.10gb": 3, "2g.20gb": 1, "3g.40gb": 1, "4g.40gb": 0, "7g.80gb": 0}},
	}, {
		name:   "two 3g.40gb leave no room: used",
		slices: migNode("m0"),
		used:   exclusive("m0/"+migName("3g.40gb", 0), "m0/"+migName("3g.40gb", 4)),
		want: FleetSummary{GPUs: 1, Used: 1, MIGPlaceable: map[string]int{
			"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0, "4g.40gb": 0, "7g.80gb": 0}},
	}, {
		name:   "whole MIG GPU allocated",
		slices: migNode("m0"),
		used:   exclusive("m0/gpu-0"),
		want: FleetSummary{GPUs: 1, Used: 1, MIGPlaceable: map[string]int{
			"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0, "4g.40gb": 0, "7g.80gb": 0}},
	}, {
		name:   "MIG placeability adds over GPUs; a partly used GPU strands its free neighbour",
		slices: append(append(migNode("m0"), migNode("m1")...), gpuNode("m2", 2, domain("d"))),
		used:   exclusive("m0/"+migName("1g.10gb", 6), "m2/gpu-1"),
		want: FleetSummary{GPUs: 4, Free: 2, Partial: 1, Used: 1, Stranded: 1, NVLinkDomains: 1, MIGPlaceable: map[string]int{
			"1g.10gb": 6 + 7, "2g.20gb": 3 + 3, "3g.40gb": 1 + 2, "4g.40gb": 1 + 1, "7g.80gb": 0 + 1}},
	}, {
		name:   "shared GPU with room left is partly used",
		slices: []*resourceapi.ResourceSlice{sharedNode("s0"), sharedNode("s1")},
		used:   uses{"s0/gpu-0": shares("40Gi")},
		want:   FleetSummary{GPUs: 2, Free: 1, Partial: 1, MIGPlaceable: noMIG},
	}, {
		name:   "shared GPU whose memory is all taken is used",
		slices: []*resourceapi.ResourceSlice{sharedNode("s0")},
		used:   uses{"s0/gpu-0": shares("80Gi")},
		want:   FleetSummary{GPUs: 1, Used: 1, MIGPlaceable: noMIG},
	}, {
		name: "cliques: free when every GPU of every tray is free",
		slices: []*resourceapi.ResourceSlice{
			gpuNode("a0", 4, rack("c.a")), gpuNode("a1", 4, rack("c.a")),
			gpuNode("b0", 4, rack("c.b")), gpuNode("b1", 4, rack("c.b")),
			// A tray that disagrees with itself is in no clique.
			gpuNode("x0", 2, func(i int) []any { return []any{"cliqueID", fmt.Sprintf("c.x%d", i)} }),
		},
		used: exclusive("b1/gpu-2"),
		want: FleetSummary{GPUs: 18, Free: 17, Used: 1, Stranded: 3, NVLinkDomains: 4, FreeNVLinkDomains: 3,
			Cliques: 2, FreeCliques: 1, MIGPlaceable: noMIG},
	}, {
		name: "cliques from node labels where the GPUs publish none (NVIDIA's DRA driver); a GPU's cliqueID wins",
		slices: []*resourceapi.ResourceSlice{
			gpuNode("l0", 4, nil), gpuNode("l1", 4, nil), gpuNode("l2", 4, nil),
			gpuNode("a0", 4, rack("c.a")),
			// GPUs that disagree are in no clique, label or not.
			gpuNode("x0", 2, func(i int) []any { return []any{"cliqueID", fmt.Sprintf("c.x%d", i)} }),
		},
		used:        exclusive("l1/gpu-0"),
		nodeCliques: map[string]string{"l0": "c.l", "l1": "c.l", "l2": "c.m", "a0": "c.other", "x0": "c.m"},
		want: FleetSummary{GPUs: 18, Free: 17, Used: 1, Stranded: 3, NVLinkDomains: 1, FreeNVLinkDomains: 1,
			Cliques: 3, FreeCliques: 2, MIGPlaceable: noMIG},
	}, {
		name: "GPUs published as their partitions alone (NVIDIA's static MIG) count, in the state their partitions make",
		slices: []*resourceapi.ResourceSlice{func() *resourceapi.ResourceSlice {
			devices := map[string][]any{}
			for _, g := range []string{"a", "b", "c"} {
				for i := range 7 {
					devices[fmt.Sprintf("gpu-%s-mig-1g10gb-%d", g, i)] = []any{"type", "mig", "parentUUID", "GPU-" + g, "profile", "1g.10gb"}
				}
			}
			return tray("s0", 1, devices)
		}()},
		used: exclusive("s0/gpu-a-mig-1g10gb-0", "s0/gpu-a-mig-1g10gb-1", "s0/gpu-a-mig-1g10gb-2", "s0/gpu-a-mig-1g10gb-3",
			"s0/gpu-a-mig-1g10gb-4", "s0/gpu-a-mig-1g10gb-5", "s0/gpu-a-mig-1g10gb-6", "s0/gpu-b-mig-1g10gb-3"),
		want: FleetSummary{GPUs: 3, Free: 1, Partial: 1, Used: 1, Stranded: 1, MIGPlaceable: map[string]int{"1g.10gb": 13}},
	}, {
		name: "a MIG GPU whose agent withholds its whole device (partitions that consume counters, no whole GPU) does not count",
		slices: func() []*resourceapi.ResourceSlice {
			m := migNode("m0")
			m[1] = m[1].DeepCopy()
			m[1].Spec.Devices = slices.DeleteFunc(m[1].Spec.Devices, func(d resourceapi.Device) bool { return d.Name == "gpu-0" })
			return append(m, gpuNode("n0", 1, nil))
		}(),
		want: FleetSummary{GPUs: 1, Free: 1, MIGPlaceable: migFree()},
	}, {
		name: "older generations, slices without a node and other devices do not count",
		slices: []*resourceapi.ResourceSlice{
			gpuNode("n0", 2, nil),
			tray("n0", 0, map[string][]any{"gpu-9": gpuAttrs("old", "")}),
			tray("n1", 1, map[string][]any{"nic-0": {"type", "nic"}}),
			{Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, Pool: resourceapi.ResourcePool{Name: "fabric"},
				Devices: []resourceapi.Device{{Name: "gpu-x", Attributes: attrs(gpuAttrs("x", "")...)}}}},
		},
		want: FleetSummary{GPUs: 2, Free: 2, MIGPlaceable: noMIG},
	}, {
		name: "a pool missing a slice offers nothing: not counted, as the allocator cannot hand its devices out",
		slices: []*resourceapi.ResourceSlice{
			gpuNode("n0", 2, nil),
			// The MIG GPU's devices without their counter slice.
			migNode("m0")[1],
			// A newer generation half published replaces a whole one.
			ofTwo(tray("n1", 1, map[string][]any{"gpu-0": gpuAttrs("a", "")})),
			ofTwo(tray("n1", 1, map[string][]any{"gpu-1": gpuAttrs("b", "")})),
			ofTwo(tray("n1", 2, map[string][]any{"gpu-0": gpuAttrs("a", "")})),
		},
		want: FleetSummary{GPUs: 2, Free: 2, MIGPlaceable: noMIG},
	}, {
		name: "devices that name their node count on it; a uuid another node's driver reuses is another GPU",
		slices: []*resourceapi.ResourceSlice{
			tray("n0", 1, map[string][]any{"gpu-0": gpuAttrs("0", "")}),
			tray("n1", 1, map[string][]any{"gpu-0": gpuAttrs("0", "")}),
			{Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, Pool: resourceapi.ResourcePool{Name: "per-device", ResourceSliceCount: 1},
				PerDeviceNodeSelection: ptr.To(true), Devices: []resourceapi.Device{
					{Name: "gpu-1", NodeName: ptr.To("n2"), Attributes: attrs(gpuAttrs("1", "")...)},
				}}},
		},
		used: exclusive("n0/gpu-0"),
		want: FleetSummary{GPUs: 3, Free: 2, Used: 1, Stranded: 0, MIGPlaceable: noMIG},
	}, {
		name: "tainted GPUs keep their state and are counted again by it; effect None and partitions' taints do not count",
		slices: []*resourceapi.ResourceSlice{
			tainted(gpuNode("n0", 4, nil), map[string]resourceapi.DeviceTaintEffect{
				"gpu-0": resourceapi.DeviceTaintEffectNoExecute, "gpu-1": resourceapi.DeviceTaintEffectNoSchedule,
				"gpu-2": resourceapi.DeviceTaintEffectNone}),
			tainted(sharedNode("s0"), map[string]resourceapi.DeviceTaintEffect{"gpu-0": resourceapi.DeviceTaintEffectNoSchedule}),
			tainted(migNode("m0")[1], map[string]resourceapi.DeviceTaintEffect{migName("1g.10gb", 0): resourceapi.DeviceTaintEffectNoSchedule}),
			migNode("m0")[0],
		},
		used: uses{"n0/gpu-0": {Exclusive: true}, "s0/gpu-0": shares("40Gi")},
		want: FleetSummary{GPUs: 6, Free: 4, Partial: 1, Used: 1, Stranded: 3, MIGPlaceable: migFree(),
			Tainted: map[string]int{StateFree: 1, StatePartial: 1, StateUsed: 1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SummarizeFleet(tc.slices, tc.used.usage, tc.nodeCliques)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("SummarizeFleet (-want +got):\n%s", diff)
			}
			if got.Free+got.Partial+got.Used != got.GPUs {
				t.Errorf("free %d + partial %d + used %d != %d GPUs", got.Free, got.Partial, got.Used, got.GPUs)
			}
		})
	}
}

// Greedy instances of one profile whose placements overlap: the first
// that fits is taken, the one overlapping it is not.
func TestSummarizeFleetOverlappingPlacements(t *testing.T) {
	s := migNode("m0")
	dev := func(name string, start int) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: attrs("type", "mig", "parentUUID", "m0-0", "profile", "odd"),
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: counters(1, start, 2)}}}
	}
	s[1].Spec.Devices = append(s[1].Spec.Devices, dev("odd-0", 0), dev("odd-1", 1), dev("odd-2", 2))
	got := SummarizeFleet(s, exclusive().usage, nil).MIGPlaceable["odd"]
	if got != 2 { // odd-0 (memory 0-1) and odd-2 (2-3); odd-1 overlaps both
		t.Errorf("placeable odd: got %d, want 2", got)
	}
}

// The scrape cost on a large fleet: 5,000 nodes of 8 NVSwitch GPUs, one
// in eight MIG-partitioned.
func BenchmarkSummarizeFleet(b *testing.B) {
	var slices []*resourceapi.ResourceSlice
	used := uses{}
	for n := range 5000 {
		node := fmt.Sprintf("n%d", n)
		if n%8 == 0 {
			slices = append(slices, migNode(node)...)
			used[node+"/"+migName("3g.40gb", 0)] = DeviceUse{Exclusive: true}
			continue
		}
		slices = append(slices, gpuNode(node, 8, func(int) []any { return []any{"productName", "NVIDIA H100 80GB HBM3"} }))
		if n%2 == 0 {
			used[node+"/gpu-0"] = DeviceUse{Exclusive: true}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		SummarizeFleet(slices, used.usage, nil)
	}
}

// Counters beyond int64's milli-units (10P, which MilliValue turns into
// 0) still compare: two halves of a 10P set are both placeable.
func TestSummarizeFleetHugeCounters(t *testing.T) {
	big := func(q string) map[string]resourceapi.Counter {
		return map[string]resourceapi.Counter{"memory": {Value: resource.MustParse(q)}}
	}
	pool := resourceapi.ResourcePool{Name: "n0", Generation: 1, ResourceSliceCount: 1}
	var devices []resourceapi.Device
	for i := range 2 {
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("half-%d", i), Attributes: attrs("type", "mig", "parentUUID", "u0", "profile", "half"),
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "set", Counters: big("5P")}},
		})
	}
	slices := []*resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{
		Driver: testDriver, NodeName: ptr.To("n0"), Pool: pool, Devices: devices,
		SharedCounters: []resourceapi.CounterSet{{Name: "set", Counters: big("10P")}},
	}}}
	if got := SummarizeFleet(slices, uses{}.usage, nil).MIGPlaceable["half"]; got != 2 {
		t.Errorf("placeable halves of a 10P counter set: %d, want 2", got)
	}
}

// Milli counters add exactly: a 300m set holds 100m and 200m.
func TestSummarizeFleetMilliCounters(t *testing.T) {
	counter := func(q string) map[string]resourceapi.Counter {
		return map[string]resourceapi.Counter{"c": {Value: resource.MustParse(q)}}
	}
	var devices []resourceapi.Device
	for i, q := range []string{"100m", "200m"} {
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("part-%d", i), Attributes: attrs("type", "mig", "parentUUID", "u0", "profile", "p"+q),
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "set", Counters: counter(q)}},
		})
	}
	slices := []*resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{
		Driver: testDriver, NodeName: ptr.To("n0"), Pool: resourceapi.ResourcePool{Name: "n0", Generation: 1, ResourceSliceCount: 1},
		Devices: devices, SharedCounters: []resourceapi.CounterSet{{Name: "set", Counters: counter("300m")}},
	}}}
	used := exclusive("n0/part-0")
	if got := SummarizeFleet(slices, used.usage, nil).MIGPlaceable["p200m"]; got != 1 {
		t.Errorf("200m partitions placeable next to an allocated 100m in a 300m set: %d, want 1", got)
	}
}
