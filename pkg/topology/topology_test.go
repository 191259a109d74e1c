package topology

import (
	"fmt"
	"math"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func attrs(kv ...any) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	m := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			m[resourceapi.QualifiedName(kv[i].(string))] = resourceapi.DeviceAttribute{StringValue: &v}
		case int:
			n := int64(v)
			m[resourceapi.QualifiedName(kv[i].(string))] = resourceapi.DeviceAttribute{IntValue: &n}
		}
	}
	return m
}

func TestPair(t *testing.T) {
	const drv = "gpu.nvidia.com"
	d := func(node string, kv ...any) GPU { return Describe(drv, node, attrs(kv...)) }
	tests := []struct {
		name string
		a, b GPU
		want LinkClass
	}{
		{"explicit NVLink domain", d("n", "nvlinkDomain", "pair-0", "uuid", "a"), d("n", "nvlinkDomain", "pair-0", "uuid", "b"), LinkNVLink},
		{"qualified attribute names", d("n", "gpu.nvidia.com/nvlinkDomain", "x", "uuid", "a"), d("n", "gpu.nvidia.com/nvlinkDomain", "x", "uuid", "b"), LinkNVLink},
		{"SXM inferred NVSwitch", d("n", "productName", "NVIDIA H100 80GB HBM3", "uuid", "a"), d("n", "productName", "NVIDIA H100 80GB HBM3", "uuid", "b"), LinkNVLink},
		{"A100 SXM inferred", d("n", "productName", "NVIDIA A100-SXM4-80GB", "uuid", "a"), d("n", "productName", "NVIDIA A100-SXM4-80GB", "uuid", "b"), LinkNVLink},
		{"PCIe card not inferred", d("n", "productName", "NVIDIA H100 PCIe", "resource.kubernetes.io/pcieRoot", "r0", "uuid", "a"), d("n", "productName", "NVIDIA H100 PCIe", "resource.kubernetes.io/pcieRoot", "r0", "uuid", "b"), LinkPCIeHostBridge},
		{"same PCIe switch", d("n", "pcieSwitch", "s0", "uuid", "a"), d("n", "pcieSwitch", "s0", "uuid", "b"), LinkPCIeSwitch},
		{"same NUMA node", d("n", "resource.kubernetes.io/numaNode", 1, "uuid", "a"), d("n", "resource.kubernetes.io/numaNode", 1, "uuid", "b"), LinkNUMA},
		{"across sockets", d("n", "resource.kubernetes.io/numaNode", 0, "uuid", "a"), d("n", "resource.kubernetes.io/numaNode", 1, "uuid", "b"), LinkSystem},
		{"MIG partitions of one GPU", d("n", "type", "mig", "parentUUID", "g"), d("n", "type", "mig", "parentUUID", "g"), LinkSameGPU},
		{"one NVL72 clique across nodes", d("n1", "cliqueID", "rack1.0"), d("n2", "cliqueID", "rack1.0"), LinkMultiNodeNVLink},
		{"different nodes", d("n1", "cliqueID", "rack1.0"), d("n2", "cliqueID", "rack2.0"), LinkNetwork},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pair(tc.a, tc.b); got != tc.want {
				t.Errorf("Pair = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOnNVSwitch(t *testing.T) {
	for p, want := range map[string]bool{
		"NVIDIA H100 80GB HBM3": true, "NVIDIA H200": true, "NVIDIA B200": true, "NVIDIA GB200": true, "NVIDIA GB200 NVL": true, "NVIDIA GB300": true,
		"NVIDIA A100-SXM4-40GB": true, "NVIDIA H100 PCIe": false, "NVIDIA H100 NVL": false, "NVIDIA H200 NVL": false,
		"NVIDIA L40S": false, "Tesla T4": false, "": false,
	} {
		if got := OnNVSwitch(p); got != want {
			t.Errorf("OnNVSwitch(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestIntactnessPrefersBrokenGroups(t *testing.T) {
	g := func(domain string, numa int64, id string) GPU {
		return GPU{Node: "n", NVLinkDomain: domain, NUMA: numa, Physical: id}
	}
	// Four pairs, pair-0 half used. Taking gpu b0 (the broken pair) leaves
	// more intact than taking a1 (splitting pair-1).
	rest := []GPU{g("p1", 0, "b1"), g("p2", 1, "a2"), g("p2", 1, "b2"), g("p3", 1, "a3"), g("p3", 1, "b3")}
	takeBroken := append([]GPU{g("p1", 0, "a1")}, rest...)
	takeFresh := append([]GPU{g("p0", 0, "b0")}, rest...)
	if Intactness(takeBroken, 8) <= Intactness(takeFresh, 8) {
		t.Errorf("intactness %v (broken pair taken) should exceed %v (fresh pair split)", Intactness(takeBroken, 8), Intactness(takeFresh, 8))
	}
	if Intactness(nil, 8) != 0 || Intactness(rest, 0) != 0 {
		t.Error("empty inputs must give 0")
	}
}

func TestWorstPair(t *testing.T) {
	a := GPU{Node: "n", NVLinkDomain: "p0", NUMA: 0, Physical: "a"}
	b := GPU{Node: "n", NVLinkDomain: "p0", NUMA: 0, Physical: "b"}
	c := GPU{Node: "n", NVLinkDomain: "p1", NUMA: 1, Physical: "c"}
	if w := WorstPair([]GPU{a, b}); w != LinkNVLink {
		t.Errorf("pair: %s", w)
	}
	if w := WorstPair([]GPU{a, b, c}); w != LinkSystem {
		t.Errorf("across sockets: %s", w)
	}
	if w := WorstPair([]GPU{a}); w != LinkSameGPU {
		t.Errorf("single: %s", w)
	}
}

func TestFragmentation(t *testing.T) {
	w := Workload{{GPUs: 1, Share: 0.5, Weight: 1}, {GPUs: 1, Share: 1, Weight: 1}}
	// The same classes needing CPU and memory besides: halves 4 cores and
	// 8 GiB, whole GPUs 8 cores and 16 GiB.
	wHost := Workload{{GPUs: 1, Share: 0.5, Weight: 1, CPUMilli: 4000, MemoryMiB: 8192}, {GPUs: 1, Share: 1, Weight: 1, CPUMilli: 8000, MemoryMiB: 16384}}
	tests := []struct {
		name     string
		free     []float64
		host     *Host
		excluded float64
		w        Workload
		want     float64
	}{
		{"all free", []float64{1, 1}, nil, 0, w, 0},
		{"all used", []float64{0, 0}, nil, 0, w, 0},
		// 0.25 free on one GPU: unusable by both classes.
		{"small leftover", []float64{0.25, 1}, nil, 0, w, 0.25},
		// 0.5 free: usable by halves, not by whole GPUs.
		{"half leftover", []float64{0.5, 0}, nil, 0, w, 0.25},
		{"classes without CPU needs ignore the host", []float64{1, 1}, &Host{}, 0, w, 0},
		{"enough CPU and memory for both", []float64{1, 1}, &Host{CPUMilli: 8000, MemoryMiB: 16384}, 0, wHost, 0},
		// Halves still fit; whole GPUs lack CPU: both free GPUs stranded for them.
		{"CPU for halves only", []float64{1, 1}, &Host{CPUMilli: 6000, MemoryMiB: 16384}, 0, wHost, 1},
		// Memory short for whole GPUs, and the half leftover is theirs to miss anyway.
		{"memory for halves only, half leftover", []float64{0.5, 1}, &Host{CPUMilli: 8000, MemoryMiB: 10000}, 0, wHost, 0.75},
		{"no CPU left strands everything", []float64{0.5, 1}, &Host{MemoryMiB: 16384}, 0, wHost, 1.5},
		{"nothing free, nothing stranded", []float64{0, 0}, &Host{}, 0, wHost, 0},
		// A multi-GPU class cannot use anything on a node with too few free GPUs.
		{"2-GPU class on one free GPU", []float64{1, 0}, nil, 0, Workload{{GPUs: 2, Share: 1, Weight: 1}}, 1},
		// A quarter of the requests may not run here (say, another GPU
		// model): both free GPUs are lost to them.
		{"a quarter excluded", []float64{1, 1}, nil, 0.25, w, 0.5},
		// Three quarters may run here and lose the half leftover as
		// before (0.25), a quarter loses everything (1.5).
		{"a quarter excluded, half leftover", []float64{0.5, 1}, nil, 0.25, w, 0.75*0.25 + 0.25*1.5},
		{"everything excluded", []float64{0.5, 1}, nil, 1, w, 1.5},
		{"out of range is clamped", []float64{1, 1}, nil, -3, w, 0},
	}
	for _, tc := range tests {
		if got := Fragmentation(tc.free, tc.host, tc.excluded, tc.w); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Fragmentation = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWorkloadValidate(t *testing.T) {
	if err := DefaultWorkload().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Workload{nil, {{GPUs: 0, Share: 1}}, {{GPUs: 1, Share: 1.5}}, {{GPUs: 2, Share: 0.5}}, {{GPUs: 1, Share: 1, Weight: -1}}, {{GPUs: 1, Share: 1, CPUMilli: -1}}, {{GPUs: 1, Share: 1, MemoryMiB: -1}}} {
		if bad.Validate() == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}

func TestGroupsMatchIntactness(t *testing.T) {
	var gpus []GPU
	for i := range 8 {
		gpus = append(gpus, GPU{Node: "n", NVLinkDomain: string(rune('a' + i%4)), PCIeRoot: string(rune('p' + i%2)), NUMA: int64(i % 2), Physical: string(rune('A' + i))})
	}
	g := NewGroups(gpus)
	scratch := make([]int, g.ScratchSize())
	for mask := range 256 {
		var free []GPU
		for i := range 8 {
			if mask&(1<<i) != 0 {
				free = append(free, gpus[i])
			}
		}
		got := g.Intactness(func(i int) bool { return mask&(1<<i) != 0 }, scratch)
		if want := Intactness(free, 8); math.Abs(got-want) > 1e-12 {
			t.Fatalf("mask %08b: Groups.Intactness %v, Intactness %v", mask, got, want)
		}
	}
}

func TestHostPressure(t *testing.T) {
	tests := []struct {
		name                  string
		freeBefore, freeAfter float64
		free, pod             Host
		want                  float64
	}{
		{"no free GPUs: nothing to strand", 0, 0, Host{CPUMilli: 8000, MemoryMiB: 8192}, Host{CPUMilli: 4000}, 0},
		{"half the CPU next to 4 free GPUs", 4, 4, Host{CPUMilli: 8000, MemoryMiB: 8192}, Host{CPUMilli: 4000, MemoryMiB: 1024}, 2},
		{"memory the larger share", 2, 2, Host{CPUMilli: 8000, MemoryMiB: 8192}, Host{CPUMilli: 1000, MemoryMiB: 6144}, 1.5},
		{"more than is left counts once", 3, 3, Host{CPUMilli: 1000, MemoryMiB: 1024}, Host{CPUMilli: 4000}, 3},
		{"nothing left to take", 3, 3, Host{}, Host{CPUMilli: 4000}, 0},
		{"a pod without CPU or memory", 3, 3, Host{CPUMilli: 1000, MemoryMiB: 1024}, Host{}, 0},
		// Half of the CPU for a quarter of the free GPU: a quarter too
		// much, next to the 3 GPUs left.
		{"CPU out of proportion to the GPU taken", 4, 3, Host{CPUMilli: 8000, MemoryMiB: 8192}, Host{CPUMilli: 4000}, 0.75},
		{"CPU in proportion to the GPU taken", 4, 3, Host{CPUMilli: 8000, MemoryMiB: 8192}, Host{CPUMilli: 2000}, 0},
		{"more GPU than CPU taken", 4, 2, Host{CPUMilli: 8000, MemoryMiB: 8192}, Host{CPUMilli: 1000}, 0},
	}
	for _, tc := range tests {
		if got := HostPressure(tc.freeBefore, tc.freeAfter, tc.free, tc.pod); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: HostPressure = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBestClass(t *testing.T) {
	// Four NVLink pairs behind two PCIe roots per NUMA node.
	var pairs []GPU
	for i := range 8 {
		p := i % 4
		pairs = append(pairs, GPU{Node: "n", NVLinkDomain: fmt.Sprint("pair-", p), PCIeRoot: fmt.Sprint("root-", p), NUMA: int64(p / 2)})
	}
	noNUMA := []GPU{{Node: "n", NUMA: -1}, {Node: "n", NUMA: -1}}
	tests := []struct {
		name string
		gpus []GPU
		n    int
		want LinkClass
	}{
		{"one GPU", pairs, 1, LinkSameGPU},
		{"a pair", pairs, 2, LinkNVLink},
		{"two pairs on one NUMA node", pairs, 4, LinkNUMA},
		{"the whole node", pairs, 8, LinkSystem},
		{"more than the node has", pairs, 9, LinkNetwork},
		{"nothing known", noNUMA, 2, LinkSystem},
	}
	for _, tc := range tests {
		if got := BestClass(tc.gpus, tc.n); got != tc.want {
			t.Errorf("%s: BestClass(%d) = %s, want %s", tc.name, tc.n, got, tc.want)
		}
	}
}

// The exact best class agrees with BestClass on nested groups and finds
// what is there when a node has fewer GPUs than asked for.
func TestBestSetClass(t *testing.T) {
	var pairs []GPU
	for i := range 8 {
		p := i % 4
		pairs = append(pairs, GPU{Node: "n", Physical: fmt.Sprint("gpu-", i), NVLinkDomain: fmt.Sprint("pair-", p), PCIeRoot: fmt.Sprint("root-", p), NUMA: int64(p / 2)})
	}
	for n := 1; n <= 9; n++ {
		if got, want := BestSetClass(pairs, n), BestClass(pairs, n); got != want && n > 1 {
			t.Errorf("n=%d: BestSetClass %s, BestClass %s", n, got, want)
		}
	}
	if got := BestSetClass(pairs[:1], 2); got != LinkNetwork {
		t.Errorf("2 of 1 GPU: %s, want %s", got, LinkNetwork)
	}
}
