package resources_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/blang/semver/v4"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
	"github.com/gputopo/gputopo/pkg/topology"
)

func discover(t *testing.T, shape mocknvml.Shape, o mocknvml.Options) []discovery.GPU {
	t.Helper()
	lib, err := mocknvml.NewWith(shape, o)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return gpus
}

func withMode(m config.Mode) config.Config {
	c := config.Default()
	c.DefaultMode = m
	return c
}

// sliceDevices flattens the node's pool.
func poolOf(t *testing.T, l *resources.Layout, taints map[string]resources.Taint) (devs []resourceapi.Device, sets []resourceapi.CounterSet) {
	t.Helper()
	r := l.Resources(taints)
	if len(r.Pools) != 1 {
		t.Fatalf("%d pools, want 1", len(r.Pools))
	}
	for _, s := range r.Pools[l.Node].Slices {
		if len(s.Devices) > resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures || len(s.SharedCounters) > resourceapi.ResourceSliceMaxCounterSets {
			t.Errorf("slice over API limits: %d devices, %d counter sets", len(s.Devices), len(s.SharedCounters))
		}
		if len(s.Devices) > 0 && len(s.SharedCounters) > 0 {
			t.Error("devices and shared counters in one slice")
		}
		devs = append(devs, s.Devices...)
		sets = append(sets, s.SharedCounters...)
	}
	for _, d := range devs {
		if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			t.Errorf("%s: %d attributes and capacities", d.Name, n)
		}
		for k, a := range d.Attributes {
			if a.VersionValue != nil {
				if _, err := semver.Parse(*a.VersionValue); err != nil {
					t.Errorf("%s: %s %q is no semantic version: %v", d.Name, k, *a.VersionValue, err)
				}
			}
		}
		if strings.ContainsAny(d.Name, ".+") {
			t.Errorf("device name %q not a DNS label", d.Name)
		}
	}
	return devs, sets
}

func TestWholeGPUsPerShape(t *testing.T) {
	tests := []struct {
		shape     mocknvml.Shape
		gpus      int
		product   string
		memMiB    int64
		domains   int
		bandwidth int64
		nvswitch  bool
		clique    bool
	}{
		{mocknvml.DGXA100, 8, "Mock NVIDIA A100-SXM4-40GB", 40960, 1, 600, true, false},
		{mocknvml.DGXH100, 8, "NVIDIA H100 80GB HBM3", 81920, 1, 900, true, false},
		{mocknvml.DGXH200, 8, "NVIDIA H200 141GB HBM3e", 144384, 1, 900, true, false},
		{mocknvml.DGXB200, 8, "NVIDIA B200 180GB HBM3e", 184320, 1, 1800, true, false},
		{mocknvml.PCIePairs, 8, "NVIDIA H100 NVL", 81920, 4, 600, false, false},
		{mocknvml.GB200Tray, 4, "NVIDIA GB200", 189471, 1, 1800, true, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.shape), func(t *testing.T) {
			l, err := resources.NewLayout("node-a", discover(t, tc.shape, mocknvml.Options{Name: "node-a", Rack: "r1"}), config.Default())
			if err != nil {
				t.Fatal(err)
			}
			devs, sets := poolOf(t, l, nil)
			if len(devs) != tc.gpus || len(sets) != 0 {
				t.Fatalf("%d devices, %d counter sets; want %d GPUs and no counters", len(devs), len(sets), tc.gpus)
			}
			domains := map[string]bool{}
			for _, d := range devs {
				a := d.Attributes
				domains[*a["nvlinkDomain"].StringValue] = true
				if *a["type"].StringValue != "gpu" || *a["productName"].StringValue != tc.product || *a["memory"].IntValue != tc.memMiB {
					t.Errorf("%s: type %s product %s memory %d", d.Name, *a["type"].StringValue, *a["productName"].StringValue, *a["memory"].IntValue)
				}
				if *a["nvlinkBandwidth"].IntValue != tc.bandwidth || *a["nvswitch"].BoolValue != tc.nvswitch {
					t.Errorf("%s: bandwidth %d nvswitch %v, want %d %v", d.Name, *a["nvlinkBandwidth"].IntValue, *a["nvswitch"].BoolValue, tc.bandwidth, tc.nvswitch)
				}
				if _, ok := a["cliqueID"]; ok != tc.clique {
					t.Errorf("%s: clique attribute present %v, want %v", d.Name, ok, tc.clique)
				}
				for _, k := range []resourceapi.QualifiedName{"uuid", "architecture", "cudaComputeCapability", "driverVersion", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/numaNode", "index"} {
					if _, ok := a[k]; !ok {
						t.Errorf("%s: no attribute %s", d.Name, k)
					}
				}
				if got := d.Capacity["memory"].Value; got.Cmp(*resource.NewQuantity(tc.memMiB*1024*1024, resource.BinarySI)) != 0 {
					t.Errorf("%s: memory capacity %s", d.Name, got.String())
				}
			}
			if len(domains) != tc.domains {
				t.Errorf("%d NVLink domains, want %d", len(domains), tc.domains)
			}
		})
	}
}

func TestGB200TraysOfOneRackShareAClique(t *testing.T) {
	a := discover(t, mocknvml.GB200Tray, mocknvml.Options{Name: "tray-1", Rack: "rack-7"})
	b := discover(t, mocknvml.GB200Tray, mocknvml.Options{Name: "tray-2", Rack: "rack-7"})
	c := discover(t, mocknvml.GB200Tray, mocknvml.Options{Name: "tray-3", Rack: "rack-8"})
	if a[0].CliqueID == "" || a[0].CliqueID != b[3].CliqueID || a[0].CliqueID == c[0].CliqueID {
		t.Errorf("cliques %q %q %q: want the first two equal, the third different", a[0].CliqueID, b[3].CliqueID, c[0].CliqueID)
	}
	if a[0].UUID == b[0].UUID {
		t.Error("two trays with the same GPU UUID")
	}
}

// MIG: every real placement of the 7-slice geometry, consuming its slices.
func TestMIGPartitionsAreRealPlacements(t *testing.T) {
	for _, shape := range []mocknvml.Shape{mocknvml.DGXA100, mocknvml.DGXH100, mocknvml.DGXH200, mocknvml.DGXB200, mocknvml.GB200Tray} {
		t.Run(string(shape), func(t *testing.T) {
			gpus := discover(t, shape, mocknvml.Options{MIG: true})
			l, err := resources.NewLayout("n", gpus, withMode(config.MIG))
			if err != nil {
				t.Fatal(err)
			}
			devs, sets := poolOf(t, l, nil)
			if len(sets) != len(gpus) {
				t.Fatalf("%d counter sets, want one per GPU (%d)", len(sets), len(gpus))
			}
			if len(sets[0].Counters) != 9 || func() bool { q := sets[0].Counters["compute"].Value; return q.CmpInt64(7) != 0 }() {
				t.Errorf("counter set %v: want compute 7 and 8 memory slices", sets[0].Counters)
			}
			starts := map[string][]int64{}
			for _, d := range devs {
				if *d.Attributes["index"].IntValue != 0 {
					continue
				}
				if d.Attributes["type"].StringValue == nil || *d.Attributes["type"].StringValue == "gpu" {
					if n := len(d.ConsumesCounters[0].Counters); n != 9 {
						t.Errorf("whole GPU consumes %d counters, want all 9", n)
					}
					continue
				}
				size := *d.Attributes["partitionSize"].StringValue
				compute := size[:strings.Index(size, "g")]
				starts[compute+"/"+itoa(len(d.ConsumesCounters[0].Counters)-1)] = append(starts[compute+"/"+itoa(len(d.ConsumesCounters[0].Counters)-1)], *d.Attributes["placement"].IntValue)
				if d.Attributes["memory"].IntValue == nil || *d.Attributes["parentUUID"].StringValue != gpus[0].UUID {
					t.Errorf("%s: attributes %v", d.Name, d.Attributes)
				}
			}
			// compute/memory slices -> starts
			want := map[string]string{"1/1": "[0 1 2 3 4 5 6]", "1/2": "[0 2 4 6]", "2/2": "[0 2 4]", "3/4": "[0 4]", "4/4": "[0]", "7/8": "[0]"}
			for k, w := range want {
				if got := fmtInts(starts[k]); got != w {
					t.Errorf("profile %s (compute/memory slices) placed at %s, want %s", k, got, w)
				}
			}
			if len(starts) != len(want) {
				t.Errorf("profiles %v, want %v", starts, want)
			}
		})
	}
}

// Profile names as nvidia-smi prints them (the DRA article selects
// partitionSize == '1g.10gb').
func TestMIGProfileNames(t *testing.T) {
	for shape, want := range map[mocknvml.Shape]string{
		mocknvml.DGXA100:   "1g.5gb 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
		mocknvml.DGXH100:   "1g.10gb 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
		mocknvml.DGXH200:   "1g.18gb 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
		mocknvml.DGXB200:   "1g.23gb 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb",
		mocknvml.GB200Tray: "1g.23gb 1g.47gb 2g.47gb 3g.93gb 4g.93gb 7g.186gb",
	} {
		gpus := discover(t, shape, mocknvml.Options{MIG: true})
		l, err := resources.NewLayout("n", gpus, withMode(config.MIG))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range l.Devices {
			if d.MIG != nil && d.GPU.Index == 0 && d.Placement.Start == 0 {
				names = append(names, d.MIG.Name)
			}
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s: profiles %s, want %s", shape, got, want)
		}
	}
}

func TestSharedGPUs(t *testing.T) {
	l, err := resources.NewLayout("n", discover(t, mocknvml.DGXH100, mocknvml.Options{}), withMode(config.Shared))
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := poolOf(t, l, nil)
	d := devs[0]
	if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
		t.Fatal("shared GPU does not allow multiple allocations")
	}
	mem, compute := d.Capacity["memory"], d.Capacity["compute"]
	if mem.RequestPolicy == nil || mem.RequestPolicy.Default.String() != "8Gi" || mem.RequestPolicy.ValidRange.Step.String() != "1Gi" {
		t.Errorf("memory policy %+v", mem.RequestPolicy)
	}
	if compute.Value.CmpInt64(100) != 0 || compute.RequestPolicy.Default.Value() != 10 {
		t.Errorf("compute capacity %s default %s", compute.Value.String(), compute.RequestPolicy.Default.String())
	}
}

// A request policy whose first step past the minimum is more than the
// GPU's memory is refused by the API server, and a default larger than
// the GPU fits no share: the agent stops with the GPU named.
func TestSharedPolicyMustFitTheGPU(t *testing.T) {
	gpus := discover(t, mocknvml.DGXH100, mocknvml.Options{})
	for _, tc := range []struct{ step, def, want string }{
		{"64Gi", "64Gi", "GPU 0 (" + gpus[0].UUID + ", NVIDIA H100 80GB HBM3, 81920 MiB): shared.memoryStep 64Gi: two steps are more than the GPU's memory"},
		{"8Gi", "96Gi", "shared.defaultMemory 96Gi is more than the GPU's memory"},
		{"40Gi", "80Gi", ""},
	} {
		c := withMode(config.Shared)
		c.Shared.MemoryStep, c.Shared.DefaultMemory = resource.MustParse(tc.step), resource.MustParse(tc.def)
		_, err := resources.NewLayout("n", gpus, c)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("step %s, default %s: %v, want %q", tc.step, tc.def, err, tc.want)
		}
	}
}

func TestModeRulesAndErrors(t *testing.T) {
	c := config.Default()
	c.GPUs = []config.GPURule{{Indexes: []int{0, 1}, Mode: config.Shared}, {Product: "H100", Mode: config.MIG}}
	if _, err := resources.NewLayout("n", discover(t, mocknvml.DGXH100, mocknvml.Options{}), c); err == nil || !strings.Contains(err.Error(), "GPU 2") || !strings.Contains(err.Error(), "MIG mode is off") {
		t.Errorf("MIG mode off: error %v, want one naming GPU 2", err)
	}
	// MIG on, the agent told to offer whole GPUs (the default): a pod
	// would get a GPU on which CUDA sees no device.
	if _, err := resources.NewLayout("n", discover(t, mocknvml.DGXH100, mocknvml.Options{MIG: true}), config.Default()); err == nil || !strings.Contains(err.Error(), "GPU 0") || !strings.Contains(err.Error(), "MIG mode is on") {
		t.Errorf("MIG mode on, mode whole: error %v, want one naming GPU 0", err)
	}
	// MIG enabled with nvidia-smi, the GPU not yet reset: NVML reports
	// the mode pending, and the error says what is missing.
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range lib.Devices {
		d.(*server.Device).GetMigModeFunc = func() (int, int, nvml.Return) {
			return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
		}
	}
	pending, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	migOnly := config.Default()
	migOnly.DefaultMode = config.MIG
	if _, err := resources.NewLayout("n", pending, migOnly); err == nil || !strings.Contains(err.Error(), "GPU 0") || !strings.Contains(err.Error(), "still off: it was enabled and takes effect at the GPU's next reset") {
		t.Errorf("MIG mode pending, mode mig: error %v, want one naming GPU 0 and the reset", err)
	}
	// Offered whole or shared, such a GPU would show CUDA no device after
	// its next reset, under the pods it was handed out to.
	for _, mode := range []config.Mode{config.Whole, config.Shared} {
		cfg := config.Default()
		cfg.DefaultMode = mode
		if _, err := resources.NewLayout("n", pending, cfg); err == nil || !strings.Contains(err.Error(), "GPU 0") || !strings.Contains(err.Error(), `configured mode "`+string(mode)+`" but MIG mode was enabled and takes effect at the GPU's next reset`) {
			t.Errorf("MIG mode pending, mode %s: error %v, want one naming GPU 0 and the reset", mode, err)
		}
	}
	gpus := discover(t, mocknvml.DGXH100, mocknvml.Options{})
	for i := range gpus {
		gpus[i].MIGEnabled = i >= 2 // as the admin set it
	}
	gpus2 := discover(t, mocknvml.DGXH100, mocknvml.Options{MIG: true})
	for i := range gpus {
		if i >= 2 {
			gpus[i] = gpus2[i]
		}
	}
	l, err := resources.NewLayout("n", gpus, c)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[config.Mode]int{}
	for _, d := range l.Devices {
		if d.MIG == nil {
			modes[d.Mode]++
		}
	}
	if modes[config.Shared] != 2 || modes[config.MIG] != 6 {
		t.Errorf("modes %v, want 2 shared and 6 MIG GPUs", modes)
	}
}

func TestHealthTaints(t *testing.T) {
	gpus := discover(t, mocknvml.DGXH100, mocknvml.Options{MIG: true})
	l, err := resources.NewLayout("n", gpus, withMode(config.MIG))
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	devs, _ := poolOf(t, l, map[string]resources.Taint{gpus[1].UUID: {Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoExecute, Since: since}})
	tainted := 0
	for _, d := range devs {
		if len(d.Taints) == 0 {
			continue
		}
		tainted++
		if idx := *d.Attributes["index"].IntValue; idx != 1 || d.Taints[0].Key != "gpu.nvidia.com/unhealthy" || d.Taints[0].Effect != resourceapi.DeviceTaintEffectNoExecute {
			t.Errorf("%s (GPU %d): taints %+v", d.Name, idx, d.Taints)
		}
		// The API server stamps the time on its clock, not the node's.
		if d.Taints[0].TimeAdded != nil {
			t.Errorf("%s: taint published with timeAdded %v, want it left to the API server", d.Name, d.Taints[0].TimeAdded)
		}
	}
	if tainted != 19 {
		t.Errorf("%d tainted devices, want the 19 of GPU 1 (whole + 18 placements)", tainted)
	}
}

// A device plugin's GPUs on the node: every device, MIG partitions too,
// carries its NoSchedule taint, next to a health taint where one is.
func TestDevicePluginTaint(t *testing.T) {
	gpus := discover(t, mocknvml.DGXH100, mocknvml.Options{MIG: true})
	l, err := resources.NewLayout("n", gpus, withMode(config.MIG))
	if err != nil {
		t.Fatal(err)
	}
	health := map[string]resources.Taint{gpus[1].UUID: {Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoExecute}}
	for _, step := range []struct {
		gpus             int64
		changed          bool
		withDevicePlugin int
	}{
		{gpus: 0, changed: false},
		{gpus: 8, changed: true, withDevicePlugin: 8 * 19},
		{gpus: 4, changed: false, withDevicePlugin: 8 * 19},
		{gpus: 0, changed: true},
	} {
		if changed := l.SetDevicePlugin(step.gpus > 0); changed != step.changed {
			t.Errorf("SetDevicePlugin(%v) changed the taints: %v, want %v", step.gpus > 0, changed, step.changed)
		}
		devs, _ := poolOf(t, l, health)
		withTaint, withBoth := 0, 0
		for _, d := range devs {
			keys := map[string]resourceapi.DeviceTaintEffect{}
			for _, taint := range d.Taints {
				keys[taint.Key] = taint.Effect
				// As the API server validates a slice's taints.
				if bad := append(validation.IsQualifiedName(taint.Key), validation.IsValidLabelValue(taint.Value)...); len(bad) > 0 {
					t.Errorf("%s: taint %+v refused by the API server: %v", d.Name, taint, bad)
				}
			}
			if keys["gpu.nvidia.com/device-plugin"] == resourceapi.DeviceTaintEffectNoSchedule {
				withTaint++
				if keys["gpu.nvidia.com/unhealthy"] != "" {
					withBoth++
				}
			}
		}
		if withTaint != step.withDevicePlugin || (step.withDevicePlugin > 0 && withBoth != 19) {
			t.Errorf("%d device plugin GPUs: %d devices with its taint (%d also unhealthy), want %d (19 also unhealthy)", step.gpus, withTaint, withBoth, step.withDevicePlugin)
		}
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

func fmtInts(s []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(itoa(int(v)))
	}
	b.WriteByte(']')
	return b.String()
}

func TestResourceSlicesAsAPIObjects(t *testing.T) {
	l, err := resources.NewLayout("node-a", discover(t, mocknvml.DGXA100, mocknvml.Options{MIG: true}), withMode(config.MIG))
	if err != nil {
		t.Fatal(err)
	}
	slices := l.ResourceSlices()
	devices := 0
	for i, s := range slices {
		if s.Name != "node-a-"+itoa(i) || *s.Spec.NodeName != "node-a" || s.Spec.Pool.Name != "node-a" || s.Spec.Pool.ResourceSliceCount != int64(len(slices)) {
			t.Errorf("slice %d: %s on %s, pool %+v", i, s.Name, *s.Spec.NodeName, s.Spec.Pool)
		}
		devices += len(s.Spec.Devices)
	}
	if len(slices) != 4 || devices != len(l.Devices) {
		t.Errorf("%d slices with %d devices, want 4 with %d", len(slices), devices, len(l.Devices))
	}
}

// PartitionShare reads back from the published devices the share of its
// GPU each MIG placement takes: its memory slices out of the GPU's.
func TestPartitionShare(t *testing.T) {
	gpus := discover(t, mocknvml.DGXA100, mocknvml.Options{MIG: true})
	l, err := resources.NewLayout("n", gpus, withMode(config.MIG))
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]resourceapi.CounterSet{}
	var devices []resourceapi.Device
	for _, s := range l.ResourceSlices() {
		for _, cs := range s.Spec.SharedCounters {
			sets[cs.Name] = cs
		}
		devices = append(devices, s.Spec.Devices...)
	}
	want := map[string]float64{"gpu-0": 1, "gpu-0-mig-1g5gb-3": 1.0 / 8, "gpu-0-mig-3g20gb-4": 4.0 / 8, "gpu-0-mig-7g40gb-0": 1}
	for i := range devices {
		d := &devices[i]
		w, ok := want[d.Name]
		if !ok {
			continue
		}
		delete(want, d.Name)
		if got := topology.PartitionShare(d, sets); got != w {
			t.Errorf("%s: share %v, want %v", d.Name, got, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("devices not published: %v", want)
	}
	if got := topology.PartitionShare(&resourceapi.Device{Name: "plain"}, nil); got != 1 {
		t.Errorf("device without counters: share %v, want 1", got)
	}
}

// WithholdOnly leaves out exactly the partitions of a GPU that overlap
// the given placements, and the whole GPU while there is any; what is no
// longer held comes back. The other GPUs' devices are not touched.
func TestWithholdOnly(t *testing.T) {
	gpus := discover(t, mocknvml.DGXH100, mocknvml.Options{MIG: true})
	l, err := resources.NewLayout("n", gpus, withMode(config.MIG))
	if err != nil {
		t.Fatal(err)
	}
	published := func() map[string]bool {
		devs, _ := poolOf(t, l, nil)
		out := map[string]bool{}
		for _, d := range devs {
			out[d.Name] = true
		}
		return out
	}
	all := published()
	for _, step := range []struct {
		name        string
		gpu         int
		placements  []discovery.Placement
		wantHeld    []string
		wantChanged bool
	}{
		{"a 3g.40gb at slices 4-7", 1, []discovery.Placement{{Start: 4, Size: 4}},
			[]string{"gpu-1", "gpu-1-mig-1g10gb-4", "gpu-1-mig-1g10gb-5", "gpu-1-mig-1g10gb-6", "gpu-1-mig-1g20gb-4", "gpu-1-mig-1g20gb-6", "gpu-1-mig-2g20gb-4", "gpu-1-mig-3g40gb-4", "gpu-1-mig-7g80gb-0"}, true},
		{"the same again", 1, []discovery.Placement{{Start: 4, Size: 4}},
			[]string{"gpu-1", "gpu-1-mig-1g10gb-4", "gpu-1-mig-1g10gb-5", "gpu-1-mig-1g10gb-6", "gpu-1-mig-1g20gb-4", "gpu-1-mig-1g20gb-6", "gpu-1-mig-2g20gb-4", "gpu-1-mig-3g40gb-4", "gpu-1-mig-7g80gb-0"}, false},
		{"replaced by a 1g.10gb at slice 0", 1, []discovery.Placement{{Start: 0, Size: 1}},
			[]string{"gpu-1", "gpu-1-mig-1g10gb-0", "gpu-1-mig-1g20gb-0", "gpu-1-mig-2g20gb-0", "gpu-1-mig-3g40gb-0", "gpu-1-mig-4g40gb-0", "gpu-1-mig-7g80gb-0"}, true},
		{"gone", 1, nil, nil, true},
	} {
		held, changed := l.WithholdOnly(step.gpu, step.placements)
		slices.Sort(held)
		want := slices.Sorted(slices.Values(step.wantHeld))
		if !slices.Equal(held, want) || changed != step.wantChanged {
			t.Errorf("%s: withheld %v, changed %v; want %v, %v", step.name, held, changed, want, step.wantChanged)
		}
		got := published()
		for name := range all {
			if got[name] == slices.Contains(want, name) {
				t.Errorf("%s: %s published %v", step.name, name, got[name])
			}
		}
	}
}

// A GPU whose memory NVML does not report (unified memory, as on GB10)
// is published whole with memory 0, so that a selector on memory does
// not match it (left out, the attribute would make such a selector a
// CEL error for the whole pod), and not shared, which needs memory; the
// node's other GPUs are as always.
func TestGPUWithoutReportedMemory(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lib.Devices[0].(*server.Device).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
	var problems []error
	gpus, err := discovery.Discover(lib, discovery.Options{Problem: func(_ int, err error) { problems = append(problems, err) }})
	if err != nil {
		t.Fatalf("discovery: %v, want GPU 0 described without memory", err)
	}
	if len(gpus) != 8 || gpus[0].MemoryMiB != 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), "unified memory") {
		t.Fatalf("%d GPUs, GPU 0 with %d MiB, problems %v: want 8, none, and GPU 0's memory said", len(gpus), gpus[0].MemoryMiB, problems)
	}
	l, err := resources.NewLayout("n", gpus, config.Default())
	if err != nil {
		t.Fatal(err)
	}
	devs := l.Resources(nil).Pools["n"].Slices[0].Devices
	if m := devs[0].Attributes["memory"].IntValue; m == nil || *m != 0 {
		t.Errorf("GPU 0 published with memory %v, want 0", devs[0].Attributes["memory"])
	}
	if m := devs[1].Attributes["memory"].IntValue; m == nil || *m == 0 {
		t.Errorf("GPU 1 published with memory %v, want its own", devs[1].Attributes["memory"])
	}
	shared := config.Default()
	shared.DefaultMode = config.Shared
	if _, err := resources.NewLayout("n", gpus, shared); err == nil || !strings.Contains(err.Error(), "GPU 0") || !strings.Contains(err.Error(), "does not report its memory") {
		t.Errorf("shared: %v, want an error naming GPU 0 and its memory", err)
	}
}
