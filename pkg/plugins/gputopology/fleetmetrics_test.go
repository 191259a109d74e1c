package gputopology

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// migSlices publish one MIG GPU on nodeName as the node agent does: its
// counter set (7 compute, 8 memory slices) in a slice of its own, the
// whole GPU and the 1g.10gb and 3g.40gb placements in another.
func migSlices(nodeName string) []*resourceapi.ResourceSlice {
	const set = "gpu-0"
	count := func(compute, start, size int) map[string]resourceapi.Counter {
		c := map[string]resourceapi.Counter{contract.CounterCompute: {Value: *resource.NewQuantity(int64(compute), resource.DecimalSI)}}
		for m := start; m < start+size; m++ {
			c[contract.MemorySliceCounter(m)] = resourceapi.Counter{Value: *resource.NewQuantity(1, resource.DecimalSI)}
		}
		return c
	}
	uuid := "GPU-" + nodeName + "-0"
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	device := func(name, profile string, compute, start, size int) resourceapi.Device {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{contract.AttrType: str(contract.TypeGPU), contract.AttrUUID: str(uuid)}
		if profile != "" {
			attrs = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{contract.AttrType: str(contract.TypeMIG), contract.AttrParentUUID: str(uuid), contract.AttrProfile: str(profile)}
		}
		return resourceapi.Device{Name: name, Attributes: attrs,
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: count(compute, start, size)}}}
	}
	devices := []resourceapi.Device{device("gpu-0", "", 7, 0, 8)}
	for start := range 7 {
		devices = append(devices, device(fmt.Sprintf("gpu-0-mig-1g10gb-%d", start), "1g.10gb", 1, start, 1))
	}
	devices = append(devices, device("gpu-0-mig-3g40gb-0", "3g.40gb", 3, 0, 4), device("gpu-0-mig-3g40gb-4", "3g.40gb", 3, 4, 4))
	pool := resourceapi.ResourcePool{Name: nodeName, ResourceSliceCount: 2}
	return []*resourceapi.ResourceSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-counters"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: contract.DefaultDriver, NodeName: ptr.To(nodeName), Pool: pool,
			SharedCounters: []resourceapi.CounterSet{{Name: set, Counters: count(7, 0, 8)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-devices"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: contract.DefaultDriver, NodeName: ptr.To(nodeName), Pool: pool, Devices: devices}},
	}
}

// The fleet gauges on the scheduler's DRA state: an allocated claim, an
// allocation in flight and a MIG partition all count.
func TestFleetCollector(t *testing.T) {
	nodeB := pcieSlice("node-b", 2)
	nodeB.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "example.com/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	env := newTestEnv(t, objects{
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  append([]*resourceapi.ResourceSlice{pairSlice("node-a", 4), nodeB}, migSlices("node-c")...),
		claims: []*resourceapi.ResourceClaim{
			claim("allocated", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj(),
			claim("mig", 1).Allocation(allocatedOn("node-c", "gpu-0-mig-3g40gb-0")).Obj(),
			claim("in-flight", 1).Obj(),
		},
	})
	c := env.storedClaim("in-flight")
	c.Status.Allocation = allocatedOn("node-b", "gpu-1")
	if err := env.pl.draManager.ResourceClaims().SignalClaimPendingAllocation(c.UID, c); err != nil {
		t.Fatal(err)
	}

	// node-a: gpu-0 used breaks pair-0 (gpu-0, gpu-2): gpu-2 stranded,
	// pair-1 free. node-b (no NVLink): gpu-1 in flight strands gpu-0.
	// node-b's gpu-0 is tainted NoSchedule: free, and tainted.
	// node-c: 3g.40gb at 0 leaves the other half: partial.
	want := `
# HELP gputopo_fleet_gpus [ALPHA] Whole GPUs by state: free (nothing allocated), partial (MIG partitions or shares allocated, room left), used (allocated whole, or no room left).
# TYPE gputopo_fleet_gpus gauge
gputopo_fleet_gpus{state="free"} 4
gputopo_fleet_gpus{state="partial"} 1
gputopo_fleet_gpus{state="used"} 2
# HELP gputopo_fleet_tainted_gpus [ALPHA] Whole GPUs whose device carries a NoSchedule or NoExecute taint (only tolerating claims may take them), by their state as in gputopo_fleet_gpus.
# TYPE gputopo_fleet_tainted_gpus gauge
gputopo_fleet_tainted_gpus{state="free"} 1
gputopo_fleet_tainted_gpus{state="partial"} 0
gputopo_fleet_tainted_gpus{state="used"} 0
# HELP gputopo_fleet_stranded_gpus [ALPHA] Free GPUs whose NVLink domain (or, for GPUs in none, node) has another GPU not free: a job wanting the whole domain cannot have them.
# TYPE gputopo_fleet_stranded_gpus gauge
gputopo_fleet_stranded_gpus 2
# HELP gputopo_fleet_nvlink_domains [ALPHA] Single-node NVLink domains: total, and free (every GPU free).
# TYPE gputopo_fleet_nvlink_domains gauge
gputopo_fleet_nvlink_domains{state="free"} 1
gputopo_fleet_nvlink_domains{state="total"} 2
# HELP gputopo_fleet_cliques [ALPHA] Multi-node NVLink cliques (the GPUs' cliqueID, else the node's nvidia.com/gpu.clique label; e.g. GB200 NVL72 racks): total, and free (every GPU of every node free).
# TYPE gputopo_fleet_cliques gauge
gputopo_fleet_cliques{state="free"} 0
gputopo_fleet_cliques{state="total"} 0
# HELP gputopo_fleet_mig_placeable [ALPHA] Instances of each MIG profile that could still be allocated, that profile alone (profiles compete for the same slices: do not add them).
# TYPE gputopo_fleet_mig_placeable gauge
gputopo_fleet_mig_placeable{profile="1g.10gb"} 3
gputopo_fleet_mig_placeable{profile="3g.40gb"} 1
# HELP gputopo_fleet_scrape_errors_total [ALPHA] Scrapes whose fleet gauges could not be computed (the scheduler's DRA state could not be read); the gauges are then absent.
# TYPE gputopo_fleet_scrape_errors_total counter
gputopo_fleet_scrape_errors_total 0
`
	collector := &fleetCollector{source: env.pl.draManager, timeout: time.Second}
	if err := testutil.CustomCollectAndCompare(collector, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// Within maxAge a scrape serves the summary computed before: the
	// in-flight allocation released, it still counts 2 used GPUs; a
	// collector without maxAge sees 1.
	cached := &fleetCollector{source: env.pl.draManager, timeout: time.Second, maxAge: time.Hour}
	if err := testutil.CustomCollectAndCompare(cached, strings.NewReader(want), "gputopo_fleet_gpus"); err != nil {
		t.Fatal(err)
	}
	env.pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(c.UID, true)
	// (A collector registers once: the next scrapes are new collectors,
	// the first with the cache.)
	again := &fleetCollector{source: env.pl.draManager, timeout: time.Second, maxAge: time.Hour, last: cached.last}
	if err := testutil.CustomCollectAndCompare(again, strings.NewReader(want), "gputopo_fleet_gpus"); err != nil {
		t.Errorf("cached summary: %v", err)
	}
	fresh := &fleetCollector{source: env.pl.draManager, timeout: time.Second}
	if err := testutil.CustomCollectAndCompare(fresh, strings.NewReader(want), "gputopo_fleet_gpus"); err == nil {
		t.Errorf("a collector without maxAge still counts the released in-flight allocation")
	}

	// A DeviceTaintRule's taint counts as a slice's: node-a's free gpu-1
	// drained by a rule.
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "drain-node-a-gpu-1"}, Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(contract.DefaultDriver), Pool: ptr.To("node-a"), Device: ptr.To("gpu-1")},
		Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoExecute},
	}}
	if _, err := env.client.ResourceV1().DeviceTaintRules().Create(env.tCtx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantTainted := strings.Replace(want[strings.Index(want, "# HELP gputopo_fleet_tainted_gpus"):strings.Index(want, "# HELP gputopo_fleet_stranded_gpus")],
		`gputopo_fleet_tainted_gpus{state="free"} 1`, `gputopo_fleet_tainted_gpus{state="free"} 2`, 1)
	var err error
	for range 100 { // until the slice tracker has applied the rule
		err = testutil.CustomCollectAndCompare(&fleetCollector{source: env.pl.draManager, timeout: time.Second},
			strings.NewReader(wantTainted), "gputopo_fleet_tainted_gpus")
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("with a DeviceTaintRule: %v", err)
	}
	// With DRADeviceTaints off the scheduler ignores taints: none counts.
	untainted := &fleetCollector{timeout: time.Second}
	untainted.setSource(env.pl.draManager, nil, false)
	noneTainted := strings.Replace(wantTainted, `gputopo_fleet_tainted_gpus{state="free"} 2`, `gputopo_fleet_tainted_gpus{state="free"} 0`, 1)
	if err := testutil.CustomCollectAndCompare(untainted, strings.NewReader(noneTainted), "gputopo_fleet_tainted_gpus"); err != nil {
		t.Errorf("with DRADeviceTaints off: %v", err)
	}
}

// The clique gauges read a node's clique label where its GPUs publish no
// cliqueID, as NVIDIA's DRA driver publishes none (GPU feature discovery
// labels the nodes), and as GPUCliquePlacement reads it.
func TestFleetCollectorCliquesFromNodeLabels(t *testing.T) {
	env := newTestEnv(t, objects{
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("tray-0", 4), pairSlice("tray-1", 4), pairSlice("tray-2", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("allocated", 1).Allocation(allocatedOn("tray-1", "gpu-0")).Obj()},
	})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, clique := range map[string]string{"tray-0": "rack-a", "tray-1": "rack-a", "tray-2": "rack-b"} {
		err := nodes.Add(st.MakeNode().Name(name).Label(contract.LabelClique, clique).Obj())
		env.tCtx.ExpectNoError(err, "add node")
	}
	want := `
# HELP gputopo_fleet_cliques [ALPHA] Multi-node NVLink cliques (the GPUs' cliqueID, else the node's nvidia.com/gpu.clique label; e.g. GB200 NVL72 racks): total, and free (every GPU of every node free).
# TYPE gputopo_fleet_cliques gauge
gputopo_fleet_cliques{state="free"} 1
gputopo_fleet_cliques{state="total"} 2
`
	collector := &fleetCollector{timeout: time.Second}
	collector.setSource(env.pl.draManager, corelisters.NewNodeLister(nodes), true)
	if err := testutil.CustomCollectAndCompare(collector, strings.NewReader(want), "gputopo_fleet_cliques"); err != nil {
		t.Error(err)
	}
}

// failingSlices is a DRA manager whose slices cannot be listed.
type failingSlices struct{ fwk.SharedDRAManager }

func (failingSlices) ResourceSlices() fwk.ResourceSliceLister { return failingSlices{} }

func (failingSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return nil, errors.New("informer not synced")
}

// A state that cannot be read gives no gauge (a zero would read as an
// empty fleet), counts the error and does not panic; neither does a
// scheduler without GPUTopology.
func TestFleetCollectorErrors(t *testing.T) {
	gauges := []string{"gputopo_fleet_gpus", "gputopo_fleet_stranded_gpus", "gputopo_fleet_nvlink_domains", "gputopo_fleet_cliques", "gputopo_fleet_mig_placeable"}
	for _, tc := range []struct {
		name       string
		source     fwk.SharedDRAManager
		wantErrors bool
	}{
		{name: "slices cannot be listed", source: failingSlices{}, wantErrors: true},
		// ResourceClaims() of the embedded nil interface panics: recovered.
		{name: "panic while reading", source: struct{ fwk.SharedDRAManager }{}, wantErrors: true},
		{name: "no GPUTopology"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collector := &fleetCollector{source: tc.source, timeout: time.Second}
			if err := testutil.CustomCollectAndCompare(collector, strings.NewReader(""), gauges...); err != nil {
				t.Error(err)
			}
			if got := collector.errors > 0; got != tc.wantErrors {
				t.Errorf("scrape errors counted: %v (%d), want %v", got, collector.errors, tc.wantErrors)
			}
		})
	}
}
