package resources

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// API limits per ResourceSlice (k8s.io/api/resource/v1).
const (
	maxDevicesPerSlice     = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
	maxCounterSetsPerSlice = resourceapi.ResourceSliceMaxCounterSets
)

// Taint is a health taint on every device of one GPU.
type Taint struct {
	// Value says why, e.g. "xid-79" or "lost".
	Value  string
	Effect resourceapi.DeviceTaintEffect
	Since  time.Time
}

// TaintKey is the key of health taints: "<driver>/unhealthy".
func (l *Layout) TaintKey() string { return l.Driver + "/unhealthy" }

// DevicePluginTaintKey is the key of the taint every device carries while
// a device plugin advertises GPUs on the node: "<driver>/device-plugin".
func (l *Layout) DevicePluginTaintKey() string { return l.Driver + "/device-plugin" }

// SetDevicePlugin records whether a device plugin advertises GPUs on the
// node, and reports whether that changes the published taints. The
// device plugin hands the same GPUs to pods without a claim, so a claim
// must not get them: NoSchedule keeps new allocations off and leaves the
// pods that run alone.
func (l *Layout) SetDevicePlugin(present bool) bool {
	changed := present != l.devicePlugin
	l.devicePlugin = present
	return changed
}

// devicePluginTaint is the taint every device carries while a device
// plugin advertises GPUs on the node; nil when none does.
func (l *Layout) devicePluginTaint() *resourceapi.DeviceTaint {
	if !l.devicePlugin {
		return nil
	}
	// No value: the resource's name is not a valid one (a label value).
	return &resourceapi.DeviceTaint{Key: l.DevicePluginTaintKey(), Effect: resourceapi.DeviceTaintEffectNoSchedule}
}

// Resources are the node's slices: one pool named after the node, shared
// counters (MIG GPUs) in slices of their own, devices in slices of at most
// the API's limit. taints are by GPU UUID.
func (l *Layout) Resources(taints map[string]Taint) resourceslice.DriverResources {
	var pool resourceslice.Pool
	var sets []resourceapi.CounterSet
	for _, d := range l.Devices {
		if d.Mode == config.MIG && d.MIG == nil {
			sets = append(sets, counterSet(d))
		}
	}
	for len(sets) > 0 {
		n := min(len(sets), maxCounterSetsPerSlice)
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: sets[:n]})
		sets = sets[n:]
	}
	var devices []resourceapi.Device
	devicePlugin := l.devicePluginTaint()
	for _, d := range l.Devices {
		if !l.withheld[d.Name] {
			dev := l.apiDevice(d, taints[d.GPU.UUID])
			if devicePlugin != nil {
				dev.Taints = append(dev.Taints, *devicePlugin)
			}
			devices = append(devices, dev)
		}
	}
	for len(devices) > 0 {
		n := min(len(devices), maxDevicesPerSlice)
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: devices[:n]})
		devices = devices[n:]
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{l.Pool(): pool}}
}

func (l *Layout) apiDevice(d Device, t Taint) resourceapi.Device {
	g := d.GPU
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		contract.AttrProductName:  str(g.Product),
		contract.AttrArchitecture: str(g.Architecture),
		contract.AttrIndex:        integer(int64(g.Index)),
	}
	if v := semver(g.CUDAComputeCapability); v != "" {
		a[contract.AttrCUDAComputeCapability] = resourceapi.DeviceAttribute{VersionValue: &v}
	}
	if v := semver(g.DriverVersion); v != "" {
		a[contract.AttrDriverVersion] = resourceapi.DeviceAttribute{VersionValue: &v}
	}
	if g.PCIeRoot != "" {
		a[deviceattribute.StandardDeviceAttributePCIeRoot] = str(g.PCIeRoot)
	}
	if g.NUMANode >= 0 {
		a[deviceattribute.StandardDeviceAttributeNUMANode] = integer(int64(g.NUMANode))
	}
	dev := resourceapi.Device{Name: d.Name, Attributes: a}
	if d.MIG != nil {
		a[contract.AttrType] = str(contract.TypeMIG)
		a[contract.AttrParentUUID] = str(g.UUID)
		a[contract.AttrProfile] = str(d.MIG.Name)
		a[contract.AttrPartitionSize] = str(d.MIG.Name)
		a[contract.AttrPlacement] = integer(int64(d.Placement.Start))
		a[contract.AttrMemory] = integer(d.MIG.MemoryMiB)
		dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			contract.CapacityMemory:          {Value: *resource.NewQuantity(d.MIG.MemoryMiB*mib, resource.BinarySI)},
			contract.CapacityMultiprocessors: {Value: *resource.NewQuantity(int64(d.MIG.Multiprocessors), resource.DecimalSI)},
		}
		dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
			CounterSet: l.counterSet[g.Index],
			Counters:   slices(d.MIG.ComputeSlices, d.Placement.Start, d.Placement.Size),
		}}
	} else {
		a[contract.AttrType] = str(contract.TypeGPU)
		a[contract.AttrUUID] = str(g.UUID)
		a[deviceattribute.StandardDeviceAttributePCIBusID] = str(g.PCIBusID)
		if g.NVLinkDomain != "" {
			a[contract.AttrNVLinkDomain] = str(g.NVLinkDomain)
			a[contract.AttrNVLinkLinks] = integer(int64(g.NVLinks))
			a[contract.AttrNVLinkBandwidth] = integer(g.NVLinkBandwidthGBps)
			a[contract.AttrNVSwitch] = resourceapi.DeviceAttribute{BoolValue: ptr.To(g.NVSwitch)}
		}
		if g.CliqueID != "" {
			a[contract.AttrCliqueID] = str(g.CliqueID)
		}
		// 0 where NVML reports no memory of the GPU's own (unified
		// memory): left out, it would turn a selector such as
		// memory >= 40000 into a CEL error that fails the pod on every
		// node, not a device that does not match.
		a[contract.AttrMemory] = integer(g.MemoryMiB)
		dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			contract.CapacityMemory: {Value: *resource.NewQuantity(g.MemoryMiB*mib, resource.BinarySI)},
		}
		switch d.Mode {
		case config.MIG:
			dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
				CounterSet: l.counterSet[g.Index],
				Counters:   slices(g.ComputeSlices(), 0, g.MemorySlices()),
			}}
		case config.Shared:
			l.shareable(&dev)
		}
	}
	if t.Effect != "" {
		// No TimeAdded: the API server stamps it on its own clock, and
		// the slice controller keeps that stamp while the taint stays.
		// The eviction controller counts tolerationSeconds from it, so a
		// node's clock ahead or behind would move every eviction.
		dev.Taints = []resourceapi.DeviceTaint{{Key: l.TaintKey(), Value: t.Value, Effect: t.Effect}}
	}
	return dev
}

// shareable lets several claims share the GPU, each taking memory
// (rounded up to the step, a default when not asked for) and compute in
// percent.
func (l *Layout) shareable(dev *resourceapi.Device) {
	p := l.cfg.Shared
	dev.AllowMultipleAllocations = ptr.To(true)
	mem := dev.Capacity[contract.CapacityMemory]
	mem.RequestPolicy = &resourceapi.CapacityRequestPolicy{
		Default:    ptr.To(p.DefaultMemory),
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(p.MemoryStep), Step: ptr.To(p.MemoryStep)},
	}
	dev.Capacity[contract.CapacityMemory] = mem
	dev.Capacity[contract.CapacityCompute] = resourceapi.DeviceCapacity{
		Value: *resource.NewQuantity(contract.SharedComputePercent, resource.DecimalSI),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default:    resource.NewQuantity(p.DefaultComputePercent, resource.DecimalSI),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1")), Step: ptr.To(resource.MustParse("1"))},
		},
	}
}

// counterSet of a MIG GPU: its compute slices and one counter per memory
// slice, so that overlapping placements exclude each other.
func counterSet(whole Device) resourceapi.CounterSet {
	g := whole.GPU
	counters := map[string]resourceapi.Counter{}
	for k, v := range slices(g.ComputeSlices(), 0, g.MemorySlices()) {
		counters[k] = resourceapi.Counter{Value: v.Value}
	}
	return resourceapi.CounterSet{Name: whole.Name, Counters: counters}
}

// slices is what a placement consumes: compute slices and the memory
// slices [start, start+size).
func slices(compute, start, size int) map[string]resourceapi.Counter {
	c := map[string]resourceapi.Counter{contract.CounterCompute: {Value: *resource.NewQuantity(int64(compute), resource.DecimalSI)}}
	for m := start; m < start+size; m++ {
		c[contract.MemorySliceCounter(m)] = resourceapi.Counter{Value: resource.MustParse("1")}
	}
	return c
}

const mib = 1024 * 1024

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func integer(n int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &n} }

// semver makes NVIDIA's versions semantic versions: "9.0" becomes
// "9.0.0", "560.28.03" becomes "560.28.3" (semver forbids leading zeros).
// Anything else is left out ("").
func semver(v string) string {
	if v == "" {
		return ""
	}
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts[:3] {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return ""
		}
		parts[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(parts[:3], ".")
}

// ResourceSlices are the node's slices as API objects named
// "<node>-<i>", for publishing without the kubelet plugin helper (the
// demo's large simulated fleets, benchmark templates).
func (l *Layout) ResourceSlices() []*resourceapi.ResourceSlice {
	pool := l.Resources(nil).Pools[l.Pool()]
	out := make([]*resourceapi.ResourceSlice, len(pool.Slices))
	for i, s := range pool.Slices {
		out[i] = &resourceapi.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", l.Node, i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: l.Driver, NodeName: ptr.To(l.Node),
				Pool:           resourceapi.ResourcePool{Name: l.Pool(), Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				Devices:        s.Devices,
				SharedCounters: s.SharedCounters,
			},
		}
	}
	return out
}
