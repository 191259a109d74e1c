package allocator

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Builders for the table-driven and quality tests.

const drvNVIDIA = "gpu.nvidia.com"

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
func num(i int64) resourceapi.DeviceAttribute  { return resourceapi.DeviceAttribute{IntValue: &i} }

// gpu describes one whole GPU of a node.
type gpu struct {
	nvlink  string // nvlinkDomain, "" for none
	numa    int64
	pcie    string
	product string
}

func gpuDevice(nodeName string, i int, g gpu) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type":                            str("gpu"),
		"uuid":                            str(fmt.Sprintf("GPU-%s-%d", nodeName, i)),
		"productName":                     str(g.product),
		"memory":                          num(81559),
		"resource.kubernetes.io/pcieRoot": str(g.pcie),
		"resource.kubernetes.io/numaNode": num(g.numa),
	}
	if g.nvlink != "" {
		attrs["nvlinkDomain"] = str(g.nvlink)
	}
	return resourceapi.Device{
		Name:       fmt.Sprintf("gpu-%d", i),
		Attributes: attrs,
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
	}
}

func gpuSlice(nodeName string, gpus []gpu) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i, g := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, gpuDevice(nodeName, i, g))
	}
	return s
}

// pairNode: 8 PCIe GPUs in NVLink-bridged pairs, pairs 0,1 on NUMA 0 and
// 2,3 on NUMA 1. Enumeration interleaves pairs (gpu-i is in pair i%4), as
// PCI bus order often does, so first-fit takes GPUs of different pairs.
func pairNode(nodeName string) *resourceapi.ResourceSlice {
	var gpus []gpu
	for i := range 8 {
		pair := i % 4
		gpus = append(gpus, gpu{
			nvlink: fmt.Sprintf("pair-%d", pair), numa: int64(pair / 2),
			pcie: fmt.Sprintf("pci0000:%02x", pair), product: "NVIDIA H100 NVL",
		})
	}
	return gpuSlice(nodeName, gpus)
}

// nvswitchNode: 8 SXM GPUs on NVSwitch; no nvlinkDomain published (as
// NVIDIA's own driver does), so the fabric must be inferred.
func nvswitchNode(nodeName string) *resourceapi.ResourceSlice {
	var gpus []gpu
	for i := range 8 {
		gpus = append(gpus, gpu{numa: int64(i / 4), pcie: fmt.Sprintf("pci0000:%02x", i/2), product: "NVIDIA H100 80GB HBM3"})
	}
	return gpuSlice(nodeName, gpus)
}

// migProfile is one A100/H100 MIG profile: compute and memory slices and
// the memory-slice offsets it may start at.
type migProfile struct {
	name       string
	compute    int
	memory     int
	placements []int
}

var a100Profiles = []migProfile{
	{"1g.10gb", 1, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	{"1g.20gb", 1, 2, []int{0, 2, 4, 6}},
	{"2g.20gb", 2, 2, []int{0, 2, 4}},
	{"3g.40gb", 3, 4, []int{0, 4}},
	{"4g.40gb", 4, 4, []int{0}},
	{"7g.80gb", 7, 8, []int{0}},
}

// migNode publishes every placement of every profile on n GPUs as devices
// consuming one shared counter set per GPU (7 compute, 8 memory slices),
// plus the whole GPU consuming all of it.
func migNode(nodeName string, n int) []*resourceapi.ResourceSlice {
	counters := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-counters"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 2},
		},
	}
	devs := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-devices"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 2},
		},
	}
	for g := range n {
		set := fmt.Sprintf("gpu-%d-slices", g)
		cs := resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{
			"compute": {Value: resource.MustParse("7")},
		}}
		for m := range 8 {
			cs.Counters[fmt.Sprintf("memory%d", m)] = resourceapi.Counter{Value: resource.MustParse("1")}
		}
		counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, cs)
		whole := gpuDevice(nodeName, g, gpu{nvlink: "nvswitch", numa: int64(g / 4), pcie: fmt.Sprintf("pci%d", g), product: "NVIDIA A100-SXM4-80GB"})
		whole.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: migCounters(7, 0, 8)}}
		devs.Spec.Devices = append(devs.Spec.Devices, whole)
		for _, p := range a100Profiles {
			for _, at := range p.placements {
				devs.Spec.Devices = append(devs.Spec.Devices, resourceapi.Device{
					Name: fmt.Sprintf("gpu-%d-mig-%s-%d", g, p.name, at),
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
						"type": str("mig"), "parentUUID": str(fmt.Sprintf("GPU-%s-%d", nodeName, g)),
						"profile": str(p.name), "placement": num(int64(at)),
					},
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: migCounters(p.compute, at, p.memory)}},
				})
			}
		}
	}
	return []*resourceapi.ResourceSlice{counters, devs}
}

func migCounters(compute, start, memory int) map[string]resourceapi.Counter {
	c := map[string]resourceapi.Counter{"compute": {Value: *resource.NewQuantity(int64(compute), resource.DecimalSI)}}
	for m := start; m < start+memory; m++ {
		c[fmt.Sprintf("memory%d", m)] = resourceapi.Counter{Value: resource.MustParse("1")}
	}
	return c
}

// sharedNode: n GPUs that can be shared, 80Gi each, requests rounded up to
// whole Gi.
func sharedNode(nodeName string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-shared"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		d := gpuDevice(nodeName, i, gpu{numa: 0, pcie: "pci0", product: "NVIDIA L40S"})
		d.AllowMultipleAllocations = ptr.To(true)
		d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {
			Value: resource.MustParse("80Gi"),
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr.To(resource.MustParse("80Gi")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi")), Step: ptr.To(resource.MustParse("1Gi"))},
			},
		}}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func class(name string, selectors ...string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range selectors {
		c.Spec.Selectors = append(c.Spec.Selectors, celSel(e))
	}
	return c
}

var (
	gpuClass    = class("gpu.nvidia.com", `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`)
	migClass    = class("mig.nvidia.com", `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"`)
	sharedClass = class("shared.gpu.nvidia.com", `device.driver == "gpu.nvidia.com" && device.allowMultipleAllocations`)
	testClasses = classList{gpuClass, migClass, sharedClass}
)

// claimOf builds a claim with one request per entry.
func claimOf(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}},
	}
}

func exact(name, className string, count int64, selectors ...string) resourceapi.DeviceRequest {
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, s := range selectors {
		e.Selectors = append(e.Selectors, celSel(s))
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: e}
}

func emptyState() *AllocatedState {
	return &AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

// commit adds allocation results to a state, as the scheduler would once
// the claims are allocated.
func commit(s *AllocatedState, results []resourceapi.AllocationResult) {
	for _, a := range results {
		for _, r := range a.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID != nil {
				s.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				continue
			}
			s.AllocatedDevices.Insert(id)
		}
	}
}

func deviceNames(results []resourceapi.AllocationResult) []string {
	var out []string
	for _, a := range results {
		for _, r := range a.Devices.Results {
			out = append(out, r.Device)
		}
	}
	return out
}

// firstFitPolicy turns every criterion off: the engine then returns the
// same devices as upstream's allocator.
func firstFitPolicy() Policy {
	p := DefaultPolicy()
	p.Topology.Enabled, p.MIG.Enabled, p.Packing.Enabled = false, false, false
	return p
}
