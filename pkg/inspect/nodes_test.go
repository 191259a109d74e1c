package inspect

import (
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func slice(node string, devs ...resourceapi.Device) resourceapi.ResourceSlice {
	return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, Devices: devs}}
}

func device(name string, attrs map[string]string) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for k, v := range attrs {
		d.Attributes[resourceapi.QualifiedName(k)] = str(v)
	}
	return d
}

// tainted gives the device the node agent's health taint.
func tainted(d resourceapi.Device, why string) resourceapi.Device {
	d.Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/unhealthy", Value: why, Effect: resourceapi.DeviceTaintEffectNoExecute}}
	return d
}

func allocated(ns, name, pod string, results ...resourceapi.DeviceRequestAllocationResult) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}}}
	if pod != "" {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID(pod)}}
	}
	return c
}

// reservedForGroup reserves c for a PodGroup, as DRAWorkloadResourceClaims
// reserves a group's own claim.
func reservedForGroup(c resourceapi.ResourceClaim, group string) resourceapi.ResourceClaim {
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: group, UID: types.UID(group)})
	return c
}

func result(pool, dev string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "gpu.nvidia.com", Pool: pool, Device: dev}
}

// Devices group by node and NVLink domain (with the clique; an SXM
// part's NVSwitch inferred), name MIG profiles, and list every claim holding a device, shares with what
// they take; a claim not yet reserved has no pod.
func TestDevices(t *testing.T) {
	share := result("shared", "gpu-0")
	share.ShareID = ptr.To(types.UID("s1"))
	share.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("16Gi")}
	slices := []resourceapi.ResourceSlice{
		slice("tray", device("gpu-2", map[string]string{"type": "gpu", "nvlinkDomain": "nvl72", "cliqueID": "c.1", "productName": "NVIDIA GB200"}),
			device("gpu-1", map[string]string{"type": "gpu", "nvlinkDomain": "nvl72", "cliqueID": "c.1", "productName": "NVIDIA GB200"}),
			device("gpu-0", map[string]string{"type": "gpu", "nvlinkDomain": "nvl72", "cliqueID": "c.1", "productName": "NVIDIA GB200"})),
		slice("a100", device("gpu-0-mig-3g", map[string]string{"type": "mig", "parentUUID": "GPU-1", "productName": "NVIDIA A100", "profile": "3g.20gb"})),
		slice("shared", device("gpu-0", map[string]string{"type": "gpu", "productName": "NVIDIA H200"}),
			tainted(device("gpu-1", map[string]string{"type": "gpu", "productName": "NVIDIA H200"}), "xid-48")),
	}
	claims := []resourceapi.ResourceClaim{
		allocated("ml", "train", "train-0", result("tray", "gpu-0"), result("tray", "gpu-1")),
		allocated("ml", "infer", "", result("a100", "gpu-0-mig-3g")),
		allocated("web", "chat", "chat-0", share),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "pending"}},
		reservedForGroup(allocated("ml", "group", "", result("tray", "gpu-2")), "train"),
	}
	var b strings.Builder
	if err := WriteDevices(&b, Devices(slices, claims, nil, "")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NODE    NVLINK DOMAIN            DEVICE        TYPE  MODEL                HELD BY",
		"a100    pcie                     gpu-0-mig-3g  mig   NVIDIA A100 3g.20gb  claim ml/infer",
		"shared  nvlink nvswitch          gpu-0         gpu   NVIDIA H200          claim web/chat (share memory 16Gi) for pod web/chat-0",
		"shared  nvlink nvswitch          gpu-1         gpu   NVIDIA H200          tainted gpu.nvidia.com/unhealthy=xid-48:NoExecute",
		"tray    nvlink nvl72, clique c.1  gpu-0         gpu   NVIDIA GB200         claim ml/train for pod ml/train-0",
		"tray    nvlink nvl72, clique c.1  gpu-1         gpu   NVIDIA GB200         claim ml/train for pod ml/train-0",
		"tray    nvlink nvl72, clique c.1  gpu-2         gpu   NVIDIA GB200         claim ml/group for pod group ml/train",
	}
	got := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), b.String())
	}
	for i := range want {
		if strings.Join(strings.Fields(got[i]), " ") != strings.Join(strings.Fields(want[i]), " ") {
			t.Errorf("line %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}
	if ds := Devices(slices, claims, nil, "tray"); len(ds) != 3 || ds[0].Node != "tray" {
		t.Errorf("node filter: %+v", ds)
	}
}

func TestClauses(t *testing.T) {
	for msg, want := range map[string][]string{
		"1 cannot allocate all claims (claim a, request r: needs 9, 8 match), 2 node(s) didn't match Pod's node affinity/selector.": {
			"1 cannot allocate all claims (claim a, request r: needs 9, 8 match)", "2 node(s) didn't match Pod's node affinity/selector."},
		// PreFilter's reason for every node: its commas are its own.
		"resourceclaim ns/c, request gpus: device class x does not exist.": {"resourceclaim ns/c, request gpus: device class x does not exist."},
		"resourceclaim ns/c is in use by 32 other consumers, the maximum.": {"resourceclaim ns/c is in use by 32 other consumers, the maximum."},
	} {
		if got := clauses(msg); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("clauses %q, want %q", got, want)
		}
	}
}

// A request for all matching devices says so; its count is 0 by API
// validation, not one device.
func TestWriteClaimAllocationModes(t *testing.T) {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
		{Name: "every", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeAll}},
		{Name: "two", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}},
	}}}}
	var b strings.Builder
	writeClaim(&b, c, time.Now())
	for _, want := range []string{"request every: all of class gpu.nvidia.com", "request two: 2 of class gpu.nvidia.com"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("claim written as %q, want %q", b.String(), want)
		}
	}
}

// A cluster with another driver beside gputopo's, a pool being
// republished and devices placed per device: only the newest generation
// counts, a device's node is its own under perDeviceNodeSelection (a
// device for many nodes is "(network)"), and another driver's devices,
// even with the same pool and device names, are neither held by
// gputopo's claims nor GPUs to the report.
func TestSeveralDrivers(t *testing.T) {
	nic := slice("a", device("a-0", nil), device("a-1", nil))
	nic.Spec.Driver = "nic.example.com"
	old := slice("a", device("old-0", gpu("old", "nv")))
	fresh := slice("a", device("a-0", gpu("a0", "nv")))
	fresh.Spec.Pool.Generation = 1
	perDevice := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", PerDeviceNodeSelection: ptr.To(true),
		Pool: resourceapi.ResourcePool{Name: "fabric", ResourceSliceCount: 1}, Devices: []resourceapi.Device{device("f-0", gpu("f0", "")), device("f-1", gpu("f1", ""))}}}
	perDevice.Spec.Devices[0].NodeName = ptr.To("a")
	perDevice.Spec.Devices[1].AllNodes = ptr.To(true)
	published := []resourceapi.ResourceSlice{nic, old, fresh, perDevice}
	nicClaim := allocated("net", "nic", "p", resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "nic.example.com", Pool: "a", Device: "a-0"})

	ds := Devices(published, []resourceapi.ResourceClaim{nicClaim}, nil, "a")
	var got []string
	for _, d := range ds {
		got = append(got, d.Pool+"/"+d.Name+" "+strings.Join(d.Holders, ","))
	}
	want := []string{"a/a-0 claim net/nic for pod net/p", "a/a-1 ", "a/a-0 ", "fabric/f-0 "}
	if strings.Join(sortedCopy(got), "|") != strings.Join(sortedCopy(want), "|") {
		t.Errorf("node a lists %q, want %q (newest generation, its own per-device GPU, NIC claim on the NIC only)", got, want)
	}
	for _, d := range Devices(published, nil, nil, "") {
		if d.Name == "f-1" && d.Node != networkNode {
			t.Errorf("a device for all nodes is on node %q, want %q", d.Node, networkNode)
		}
	}

	view := NewFleetView(published, nil)
	if gpus, used := gpuUse(view.Occupancy([]resourceapi.ResourceClaim{nicClaim})); gpus != 2 || used != 0 {
		t.Errorf("occupancy: %d GPUs, %v used; want gputopo's 2 on node a (a-0, f-0), none used by the NIC claim", gpus, used)
	}
}

// A GPU published as its partitions alone (NVIDIA's driver in MIG mode
// without DynamicMIG) is in the report's occupancy, once, on its node.
func TestOccupancyOfGPUsPublishedAsPartitions(t *testing.T) {
	mig := func(name, parent string) resourceapi.Device {
		return device(name, map[string]string{"type": "mig", "parentUUID": parent, "profile": "3g.40gb"})
	}
	published := []resourceapi.ResourceSlice{slice("s", mig("gpu-0-mig-0", "g0"), mig("gpu-0-mig-4", "g0"), mig("gpu-1-mig-0", "g1"), mig("gpu-1-mig-4", "g1"))}
	nodes := NewFleetView(published, nil).Occupancy([]resourceapi.ResourceClaim{allocated("ns", "c", "p", result("s", "gpu-1-mig-4"))})
	if gpus, used := gpuUse(nodes); len(nodes) != 1 || gpus != 2 || used != 1 {
		t.Errorf("occupancy %+v: %d GPUs, %v used; want node s with 2 GPUs, 1 used (a partition without counters takes its GPU)", nodes, gpus, used)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}

// heldByLines is the table's HELD BY column, per device: "device
// [group]: line | line".
func heldByLines(t *testing.T, ds []Device) []string {
	t.Helper()
	var b strings.Builder
	if err := WriteDevices(&b, ds); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	col := strings.Index(lines[0], "HELD BY")
	var out []string
	i := -1
	for _, l := range lines[1:] {
		if strings.TrimSpace(l[:col]) != "" {
			i++
			out = append(out, ds[i].Name+" ["+ds[i].Group+"]: "+l[col:])
			continue
		}
		out[i] += " | " + l[col:]
	}
	return out
}

func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// An admin-access allocation (a monitoring agent's) does not take the
// device, as for the scheduler: nodes lists the claim but the device is
// still free, and neither the report's occupancy, link classes nor
// fleet summary count it.
func TestAdminAccessHoldsNothing(t *testing.T) {
	sl := []resourceapi.ResourceSlice{slice("n1", device("gpu-0", gpu("g0", "d")), device("gpu-1", gpu("g1", "d")))}
	admin := func(r resourceapi.DeviceRequestAllocationResult) resourceapi.DeviceRequestAllocationResult {
		r.AdminAccess = ptr.To(true)
		return r
	}
	claims := []resourceapi.ResourceClaim{
		allocated("monitoring", "dcgm", "dcgm-x", admin(result("n1", "gpu-0")), admin(result("n1", "gpu-1"))),
		allocated("ml", "one", "p", result("n1", "gpu-1")),
	}
	checkLines(t, heldByLines(t, Devices(sl, claims, nil, "")), []string{
		"gpu-0 [nvlink d]: claim monitoring/dcgm (admin access) for pod monitoring/dcgm-x | free",
		"gpu-1 [nvlink d]: claim monitoring/dcgm (admin access) for pod monitoring/dcgm-x | claim ml/one for pod ml/p",
	})
	r := LiveReport(Cluster{Slices: sl, Claims: claims[:1]}, "x", time.Unix(0, 0))
	if res := r.Schedulers[0]; res.UnallocatedGPUPercent != 100 || len(res.LinkClasses) != 0 {
		t.Errorf("unallocated %v%%, link classes %v; want 100%% and none", res.UnallocatedGPUPercent, res.LinkClasses)
	}
	if fleet := tableRows(r.Tables[0]); fleet["GPUs free"] != "2" || fleet["GPUs used"] != "0" {
		t.Errorf("fleet %v: want both GPUs free", fleet)
	}
}

// a100 is an A100 in MIG mode as the node agent publishes it: the whole
// GPU and two partitions consume the counters of one set (memory slices
// 0-7 and 7 compute slices).
func a100() resourceapi.ResourceSlice {
	counters := func(compute int64, from, to int) map[string]resourceapi.Counter {
		c := map[string]resourceapi.Counter{contract.CounterCompute: {Value: *resource.NewQuantity(compute, resource.DecimalSI)}}
		for i := from; i < to; i++ {
			c[contract.MemorySliceCounter(i)] = resourceapi.Counter{Value: resource.MustParse("1")}
		}
		return c
	}
	consumes := func(d resourceapi.Device, c map[string]resourceapi.Counter) resourceapi.Device {
		d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: c}}
		return d
	}
	mig := func(name, profile string) resourceapi.Device {
		return device(name, map[string]string{"type": "mig", "parentUUID": "GPU-0", "productName": "NVIDIA A100-PCIE-40GB", "profile": profile})
	}
	s := slice("a100",
		consumes(device("gpu-0", map[string]string{"type": "gpu", "uuid": "GPU-0", "productName": "NVIDIA A100-PCIE-40GB", "nvlinkDomain": "nvlink-0"}), counters(7, 0, 8)),
		consumes(mig("gpu-0-mig-3g-0", "3g.20gb"), counters(3, 0, 4)),
		consumes(mig("gpu-0-mig-4g-0", "4g.20gb"), counters(4, 4, 8)))
	s.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "gpu-0", Counters: counters(7, 0, 8)}}
	return s
}

// A device whose shared counters the allocated devices use up is not
// free (the allocator cannot give it), and says what uses them; a MIG
// partition is in its GPU's NVLink group, not a made-up one.
func TestSharedCountersBlock(t *testing.T) {
	sl := []resourceapi.ResourceSlice{a100()}
	for _, tc := range []struct {
		name   string
		claims []resourceapi.ResourceClaim
		want   []string
	}{
		{"a partition", []resourceapi.ResourceClaim{allocated("ml", "infer", "infer-0", result("a100", "gpu-0-mig-3g-0"))}, []string{
			"gpu-0 [nvlink nvlink-0]: unavailable: counters of gpu-0 in use by gpu-0-mig-3g-0",
			"gpu-0-mig-3g-0 [nvlink nvlink-0]: claim ml/infer for pod ml/infer-0",
			"gpu-0-mig-4g-0 [nvlink nvlink-0]: free",
		}},
		{"the whole GPU", []resourceapi.ResourceClaim{allocated("ml", "train", "", result("a100", "gpu-0"))}, []string{
			"gpu-0 [nvlink nvlink-0]: claim ml/train",
			"gpu-0-mig-3g-0 [nvlink nvlink-0]: unavailable: counters of gpu-0 in use by gpu-0",
			"gpu-0-mig-4g-0 [nvlink nvlink-0]: unavailable: counters of gpu-0 in use by gpu-0",
		}},
		{"admin access takes no counters", []resourceapi.ResourceClaim{allocated("mon", "dcgm", "", func() resourceapi.DeviceRequestAllocationResult {
			r := result("a100", "gpu-0")
			r.AdminAccess = ptr.To(true)
			return r
		}())}, []string{
			"gpu-0 [nvlink nvlink-0]: claim mon/dcgm (admin access) | free",
			"gpu-0-mig-3g-0 [nvlink nvlink-0]: free",
			"gpu-0-mig-4g-0 [nvlink nvlink-0]: free",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLines(t, heldByLines(t, Devices(sl, tc.claims, nil, "")), tc.want) })
	}
	unpublished := a100()
	unpublished.Spec.SharedCounters = nil
	if got := heldByLines(t, Devices([]resourceapi.ResourceSlice{unpublished}, nil, nil, ""))[0]; got != "gpu-0 [nvlink nvlink-0]: unavailable: counter set gpu-0 not published" {
		t.Errorf("a device of a counter set not published: %q", got)
	}
}

// A taint with effect None is informational: the device is still free.
// NoSchedule and NoExecute leave it to claims that tolerate them.
func TestTaintEffects(t *testing.T) {
	taint := func(d resourceapi.Device, effect resourceapi.DeviceTaintEffect) resourceapi.Device {
		d.Taints = []resourceapi.DeviceTaint{{Key: "example.com/t", Value: "x", Effect: effect}}
		return d
	}
	sl := []resourceapi.ResourceSlice{slice("a",
		taint(device("a-0", gpu("a0", "d")), resourceapi.DeviceTaintEffectNone),
		taint(device("a-1", gpu("a1", "d")), resourceapi.DeviceTaintEffectNoSchedule))}
	checkLines(t, heldByLines(t, Devices(sl, nil, nil, "")), []string{
		"a-0 [nvlink d]: free | tainted example.com/t=x:None (informational)",
		"a-1 [nvlink d]: tainted example.com/t=x:NoSchedule",
	})
}

// DeviceTaintRules taint the devices their selector picks, as the
// scheduler applies them, named; the report counts the rules' taints as
// the scheduler's gauge does.
func TestDeviceTaintRules(t *testing.T) {
	sl := []resourceapi.ResourceSlice{
		slice("a", device("a-0", gpu("a0", "d")), device("a-1", gpu("a1", "d"))),
		slice("b", device("b-0", gpu("b0", "d"))),
	}
	rule := func(name string, effect resourceapi.DeviceTaintEffect, driver, pool, dev *string) resourceapi.DeviceTaintRule {
		r := resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceTaintRuleSpec{
			Taint: resourceapi.DeviceTaint{Key: "example.com/" + name, Value: "x", Effect: effect}}}
		if driver != nil || pool != nil || dev != nil {
			r.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{Driver: driver, Pool: pool, Device: dev}
		}
		return r
	}
	rules := []resourceapi.DeviceTaintRule{
		rule("maintenance", resourceapi.DeviceTaintEffectNoSchedule, ptr.To("gpu.nvidia.com"), ptr.To("a"), ptr.To("a-1")),
		rule("audit", resourceapi.DeviceTaintEffectNone, nil, ptr.To("b"), nil),
		rule("other-driver", resourceapi.DeviceTaintEffectNoExecute, ptr.To("nic.example.com"), nil, nil),
		rule("no-selector", resourceapi.DeviceTaintEffectNoExecute, nil, nil, nil),
	}
	checkLines(t, heldByLines(t, Devices(sl, nil, rules, "")), []string{
		"a-0 [nvlink d]: free",
		"a-1 [nvlink d]: tainted example.com/maintenance=x:NoSchedule (DeviceTaintRule maintenance)",
		"b-0 [nvlink d]: free | tainted example.com/audit=x:None (DeviceTaintRule audit) (informational)",
	})
	r := LiveReport(Cluster{Slices: sl, Rules: rules}, "x", time.Unix(0, 0))
	if got := tableRows(r.Tables[0])["GPUs tainted (free / partly used / used)"]; got != "1 (1 / 0 / 0)" {
		t.Errorf("report's tainted GPUs %q, want the rule's NoSchedule one only", got)
	}
	if len(sl[0].Spec.Devices[1].Taints) != 0 {
		t.Errorf("the report changed the slices it was given")
	}
}

// A claim whose devices report binding conditions says which wait, since
// when, or which failed.
func TestWriteClaimBinding(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	claim := func(stamped bool, reported ...string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "r", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0", BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"}},
			{Request: "r", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-1"},
		}}}
		if stamped {
			c.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: now.Add(-3 * time.Minute)}
		}
		for _, cond := range reported {
			c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0",
				Conditions: []metav1.Condition{{Type: cond, Status: metav1.ConditionTrue}}})
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string // "" for no binding line
	}{
		{"waiting", claim(true), "binding: waiting for n/gpu-0 (Attached), allocated 3m0s ago; the scheduler frees the claim once its bindingTimeout passes"},
		{"waiting, no timestamp", claim(false), "binding: waiting for n/gpu-0 (Attached), with no allocation timestamp, so without a timeout"},
		{"failed", claim(true, "AttachFailed"), "binding failed: n/gpu-0 (AttachFailed); the scheduler frees the claim at its pod's next attempt"},
		{"attached", claim(true, "Attached"), ""},
	} {
		var b strings.Builder
		writeClaim(&b, tc.claim, now)
		got := b.String()
		if tc.want == "" && strings.Contains(got, "binding") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: written as %q, want %q", tc.name, got, tc.want)
		}
	}
}
