package inspect

import (
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func slice(node string, devs ...resourceapi.Device) resourceapi.ResourceSlice {
	return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node}, Devices: devs}}
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
		slice("tray", device("gpu-1", map[string]string{"type": "gpu", "nvlinkDomain": "nvl72", "cliqueID": "c.1", "productName": "NVIDIA GB200"}),
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
	}
	var b strings.Builder
	if err := WriteDevices(&b, Devices(slices, claims, "")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NODE    NVLINK DOMAIN            DEVICE        TYPE  MODEL                HELD BY",
		"a100    pcie                     gpu-0-mig-3g  mig   NVIDIA A100 3g.20gb  claim ml/infer",
		"shared  nvlink nvswitch          gpu-0         gpu   NVIDIA H200          claim web/chat (share memory 16Gi) for pod web/chat-0",
		"shared  nvlink nvswitch          gpu-1         gpu   NVIDIA H200          tainted gpu.nvidia.com/unhealthy=xid-48:NoExecute",
		"tray    nvlink nvl72, clique c.1  gpu-0         gpu   NVIDIA GB200         claim ml/train for pod ml/train-0",
		"tray    nvlink nvl72, clique c.1  gpu-1         gpu   NVIDIA GB200         claim ml/train for pod ml/train-0",
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
	if ds := Devices(slices, claims, "tray"); len(ds) != 2 || ds[0].Node != "tray" {
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
	writeClaim(&b, c)
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
		Pool: resourceapi.ResourcePool{Name: "fabric"}, Devices: []resourceapi.Device{device("f-0", gpu("f0", "")), device("f-1", gpu("f1", ""))}}}
	perDevice.Spec.Devices[0].NodeName = ptr.To("a")
	perDevice.Spec.Devices[1].AllNodes = ptr.To(true)
	published := []resourceapi.ResourceSlice{nic, old, fresh, perDevice}
	nicClaim := allocated("net", "nic", "p", resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "nic.example.com", Pool: "a", Device: "a-0"})

	ds := Devices(published, []resourceapi.ResourceClaim{nicClaim}, "a")
	var got []string
	for _, d := range ds {
		got = append(got, d.Pool+"/"+d.Name+" "+strings.Join(d.Holders, ","))
	}
	want := []string{"a/a-0 claim net/nic for pod net/p", "a/a-1 ", "a/a-0 ", "fabric/f-0 "}
	if strings.Join(sortedCopy(got), "|") != strings.Join(sortedCopy(want), "|") {
		t.Errorf("node a lists %q, want %q (newest generation, its own per-device GPU, NIC claim on the NIC only)", got, want)
	}
	for _, d := range Devices(published, nil, "") {
		if d.Name == "f-1" && d.Node != networkNode {
			t.Errorf("a device for all nodes is on node %q, want %q", d.Node, networkNode)
		}
	}

	view := NewFleetView(published, nil)
	if gpus, used := gpuUse(view.Occupancy([]resourceapi.ResourceClaim{nicClaim})); gpus != 2 || used != 0 {
		t.Errorf("occupancy: %d GPUs, %v used; want gputopo's 2 on node a (a-0, f-0), none used by the NIC claim", gpus, used)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}
