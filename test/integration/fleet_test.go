package integration

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// Slices in the shape gputopo's node agent publishes (driver
// gpu.nvidia.com, NVIDIA-compatible attributes plus topology), written
// directly so that scheduling tests can use node shapes the mocks lack
// (L40S, 2-GPU MIG nodes) and start in milliseconds.
// TestNodeAgentsWithTheScheduler runs the agents themselves.

const driver = contract.DefaultDriver

type gpuSpec struct {
	product string
	memMiB  int64
	nvlink  string
	numa    int64
	pcie    string
	clique  string
}

func attr(v any) resourceapi.DeviceAttribute {
	switch v := v.(type) {
	case string:
		return resourceapi.DeviceAttribute{StringValue: &v}
	case int64:
		return resourceapi.DeviceAttribute{IntValue: &v}
	case int:
		n := int64(v)
		return resourceapi.DeviceAttribute{IntValue: &n}
	case bool:
		return resourceapi.DeviceAttribute{BoolValue: &v}
	}
	panic(fmt.Sprintf("attribute of type %T", v))
}

func gpuDevice(node string, i int, g gpuSpec) resourceapi.Device {
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		contract.AttrType:                               attr(contract.TypeGPU),
		contract.AttrUUID:                               attr(fmt.Sprintf("GPU-%s-%d", node, i)),
		contract.AttrProductName:                        attr(g.product),
		contract.AttrMemory:                             attr(g.memMiB),
		deviceattribute.StandardDeviceAttributePCIeRoot: attr(g.pcie),
		deviceattribute.StandardDeviceAttributeNUMANode: attr(g.numa),
	}
	if g.nvlink != "" {
		a[contract.AttrNVLinkDomain] = attr(g.nvlink)
	}
	if g.clique != "" {
		a[contract.AttrCliqueID] = attr(g.clique)
	}
	return resourceapi.Device{
		Name:       fmt.Sprintf("gpu-%d", i),
		Attributes: a,
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{contract.CapacityMemory: {Value: *resource.NewQuantity(g.memMiB*1024*1024, resource.BinarySI)}},
	}
}

func slice(node, suffix string, count int64, devs []resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + suffix},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node),
			Pool:    resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: count},
			Devices: devs,
		},
	}
}

func gpuNode(node string, gpus ...gpuSpec) *resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for i, g := range gpus {
		devs = append(devs, gpuDevice(node, i, g))
	}
	return slice(node, "gpus", 1, devs)
}

// pairNode: 8 PCIe H100 NVL in NVLink pairs, pairs 0 and 1 on NUMA 0, 2
// and 3 on NUMA 1; PCI order interleaves the pairs.
func pairNode(node string) *resourceapi.ResourceSlice {
	var gpus []gpuSpec
	for i := range 8 {
		p := i % 4
		gpus = append(gpus, gpuSpec{product: "NVIDIA H100 NVL", memMiB: 95830, nvlink: fmt.Sprintf("pair-%d", p), numa: int64(p / 2), pcie: fmt.Sprintf("pci0000:%02x", p)})
	}
	return gpuNode(node, gpus...)
}

// nvl72Tray: a GB200 NVL72 compute tray, 4 GPUs on the rack's NVLink
// fabric, published with the rack's clique.
func nvl72Tray(node, clique string) *resourceapi.ResourceSlice {
	var gpus []gpuSpec
	for i := range 4 {
		gpus = append(gpus, gpuSpec{product: "NVIDIA GB200", memMiB: 189471, nvlink: "nvl72", numa: int64(i / 2), pcie: fmt.Sprintf("pci0000:%02x", i), clique: clique})
	}
	return gpuNode(node, gpus...)
}

// nvswitchNode: 8 H100 SXM on NVSwitch, no NVLink attribute (inferred).
func nvswitchNode(node string) *resourceapi.ResourceSlice {
	var gpus []gpuSpec
	for i := range 8 {
		gpus = append(gpus, gpuSpec{product: "NVIDIA H100 80GB HBM3", memMiB: 81559, numa: int64(i / 4), pcie: fmt.Sprintf("pci0000:%02x", i/2)})
	}
	return gpuNode(node, gpus...)
}

type migProfile struct {
	name       string
	compute    int64
	memory     int
	memMiB     int64
	placements []int
}

var a100Profiles = []migProfile{
	{"1g.10gb", 1, 1, 9728, []int{0, 1, 2, 3, 4, 5, 6}},
	{"2g.20gb", 2, 2, 19968, []int{0, 2, 4}},
	{"3g.40gb", 3, 4, 40192, []int{0, 4}},
	{"4g.40gb", 4, 4, 40192, []int{0}},
	{"7g.80gb", 7, 8, 80384, []int{0}},
}

// migNode: H100 80GB GPUs (same MIG geometry as the A100) with every MIG placement as a device consuming
// the GPU's counters (7 compute, 8 memory slices), and the whole GPU.
func migNode(node string, gpus int) []*resourceapi.ResourceSlice {
	var sets []resourceapi.CounterSet
	var devs []resourceapi.Device
	for g := range gpus {
		set := fmt.Sprintf("gpu-%d-counters", g)
		cs := resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{contract.CounterCompute: {Value: resource.MustParse("7")}}}
		for m := range 8 {
			cs.Counters[contract.MemorySliceCounter(m)] = resourceapi.Counter{Value: resource.MustParse("1")}
		}
		sets = append(sets, cs)
		whole := gpuDevice(node, g, gpuSpec{product: "NVIDIA H100 80GB HBM3", memMiB: 81559, numa: 0, pcie: "pci0"})
		whole.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: migCounters(7, 0, 8)}}
		devs = append(devs, whole)
		for _, p := range a100Profiles {
			for _, at := range p.placements {
				devs = append(devs, resourceapi.Device{
					Name: fmt.Sprintf("gpu-%d-mig-%s-%d", g, strings.ReplaceAll(p.name, ".", ""), at), // names may not contain dots
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
						contract.AttrType: attr(contract.TypeMIG), contract.AttrParentUUID: attr(fmt.Sprintf("GPU-%s-%d", node, g)),
						contract.AttrPartitionSize: attr(p.name), contract.AttrProfile: attr(p.name), contract.AttrPlacement: attr(at),
						contract.AttrProductName: attr("NVIDIA H100 80GB HBM3"), contract.AttrMemory: attr(p.memMiB),
					},
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: migCounters(p.compute, at, p.memory)}},
				})
			}
		}
	}
	counters := slice(node, "counters", 2, nil)
	counters.Spec.SharedCounters = sets
	return []*resourceapi.ResourceSlice{counters, slice(node, "mig", 2, devs)}
}

func migCounters(compute int64, start, memory int) map[string]resourceapi.Counter {
	c := map[string]resourceapi.Counter{contract.CounterCompute: {Value: *resource.NewQuantity(compute, resource.DecimalSI)}}
	for m := start; m < start+memory; m++ {
		c[contract.MemorySliceCounter(m)] = resourceapi.Counter{Value: resource.MustParse("1")}
	}
	return c
}

// sharedNode: n L40S that can be shared; memory requests round up to
// whole Gi; a share without a request takes 8Gi.
func sharedNode(node string, n int) *resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for i := range n {
		d := gpuDevice(node, i, gpuSpec{product: "NVIDIA L40S", memMiB: 46068, numa: 0, pcie: "pci0"})
		d.AllowMultipleAllocations = ptr.To(true)
		d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{contract.CapacityMemory: {
			Value: resource.MustParse("48Gi"),
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr.To(resource.MustParse("8Gi")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi")), Step: ptr.To(resource.MustParse("1Gi"))},
			},
		}}
		devs = append(devs, d)
	}
	return slice(node, "shared", 1, devs)
}
