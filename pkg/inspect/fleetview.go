package inspect

import (
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/topology"
)

// FleetView indexes published devices for the report's figures: what
// each GPU or MIG partition is and which GPU it lives on, and each node's
// whole GPUs in order. As the scheduler, it reads each pool's newest
// generation only, and other kinds of devices (another driver's NICs)
// are not GPUs.
type FleetView struct {
	devices map[string]viewDevice // DeviceKey
	nodes   map[string][]gpuEntry // node -> whole GPUs in published order
	shapes  map[string]string
}

type viewDevice struct {
	gpu      topology.GPU
	physical string  // the GPU it lives on: driver/node/uuid
	share    float64 // of its GPU a device takes whole (MIG: topology.PartitionShare)
	shared   bool
}

type gpuEntry struct{ physical, domain string }

// DeviceKey names a device fleet-wide: driver/pool/device.
func DeviceKey(driver, pool, device string) string { return driver + "/" + pool + "/" + device }

// holdsDevice: the result takes its device. An admin-access result holds
// nothing: the scheduler's tracker counts it as not allocated.
func holdsDevice(r resourceapi.DeviceRequestAllocationResult) bool {
	return !ptr.Deref(r.AdminAccess, false)
}

// NewFleetView indexes the devices of the slices on the nodes that shapes
// names (node -> a label for its kind, such as "dgx-h100"); a nil shapes
// keeps every node, labelled by its GPUs' product.
func NewFleetView(published []resourceapi.ResourceSlice, shapes map[string]string) FleetView {
	v := FleetView{devices: map[string]viewDevice{}, nodes: map[string][]gpuEntry{}, shapes: shapes}
	if shapes == nil {
		v.shapes = map[string]string{}
	}
	current := newestGenerations(published)
	counterSets := map[string]map[string]resourceapi.CounterSet{} // driver/pool -> set name -> set
	for _, s := range current {
		for _, cs := range s.Spec.SharedCounters {
			pool := s.Spec.Driver + "/" + s.Spec.Pool.Name
			if counterSets[pool] == nil {
				counterSets[pool] = map[string]resourceapi.CounterSet{}
			}
			counterSets[pool][cs.Name] = cs
		}
	}
	for _, s := range current {
		for i := range s.Spec.Devices {
			v.add(s, &s.Spec.Devices[i], counterSets[s.Spec.Driver+"/"+s.Spec.Pool.Name], shapes == nil)
		}
	}
	return v
}

// add indexes one device of slice s, if it is a GPU or a partition of one
// on a node the view keeps; label names nodes by their GPUs' product.
func (v FleetView) add(s *resourceapi.ResourceSlice, d *resourceapi.Device, sets map[string]resourceapi.CounterSet, label bool) {
	node := topology.DeviceNode(s, d)
	if _, ok := v.shapes[node]; !ok && (!label || node == "") {
		return
	}
	g := topology.Describe(s.Spec.Driver, node, d.Attributes)
	if !g.Partition && !g.WholeGPU() {
		return
	}
	key := DeviceKey(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
	physical := topology.PhysicalKey(s.Spec.Driver, node, g.Physical)
	if physical == "" {
		physical = key // a GPU that names no uuid is its own
	}
	dev := viewDevice{gpu: g, physical: physical, share: 1, shared: ptr.Deref(d.AllowMultipleAllocations, false)}
	if g.Partition {
		dev.share = topology.PartitionShare(d, sets)
	}
	// A GPU published as its partitions alone (NVIDIA's driver in MIG
	// mode without DynamicMIG: partitions without counters) is listed by
	// its first partition, until its whole device, if any, says better.
	// Partitions with counters and no whole device are the agent's GPU
	// withheld in part, which SummarizeFleet leaves out too.
	switch {
	case !g.Partition:
		v.addGPU(node, physical, g.NVLinkDomain, true)
	case g.Physical != "" && len(d.ConsumesCounters) == 0:
		v.addGPU(node, physical, g.NVLinkDomain, false)
	}
	if !g.Partition && label && v.shapes[node] == "" {
		v.shapes[node] = model(*d, s.Spec.Driver)
	}
	v.devices[key] = dev
}

// addGPU lists the node's GPU once, in its NVLink domain ("pcie" for
// none), the one its whole device says when there is one.
func (v FleetView) addGPU(node, physical, domain string, whole bool) {
	if domain == "" {
		domain = "pcie"
	}
	for i, e := range v.nodes[node] {
		if e.physical == physical {
			if whole {
				v.nodes[node][i].domain = domain
			}
			return
		}
	}
	v.nodes[node] = append(v.nodes[node], gpuEntry{physical, domain})
}

// newestGenerations keeps the slices of each pool's newest generation.
func newestGenerations(slices []resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	ptrs := make([]*resourceapi.ResourceSlice, len(slices))
	for i := range slices {
		ptrs[i] = &slices[i]
	}
	return topology.NewestGenerations(ptrs)
}

// GPU is the device named by DeviceKey as the topology sees it.
func (v FleetView) GPU(key string) (topology.GPU, bool) {
	d, ok := v.devices[key]
	return d.gpu, ok
}

// Occupancy is each GPU's used share: whole devices count 1, MIG
// partitions their memory slices, shares their compute percentage; an
// admin-access allocation uses none (the scheduler counts it as not
// allocated).
func (v FleetView) Occupancy(claims []resourceapi.ResourceClaim) []report.NodeUse {
	used := map[string]float64{} // by physical GPU
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if !holdsDevice(res) {
				continue
			}
			d, ok := v.devices[DeviceKey(res.Driver, res.Pool, res.Device)]
			if !ok {
				continue
			}
			share := d.share
			if d.shared {
				share = 0.1 // the request policy's default compute share
				if q, ok := res.ConsumedCapacity[contract.CapacityCompute]; ok {
					share = float64(q.Value()) / 100
				}
			}
			used[d.physical] += share
		}
	}
	names := make([]string, 0, len(v.nodes))
	for n := range v.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []report.NodeUse
	for _, n := range names {
		nu := report.NodeUse{Name: n, Shape: v.shapes[n]}
		index := map[string]int{}
		for _, g := range v.nodes[n] {
			i, ok := index[g.domain]
			if !ok {
				i = len(nu.Domains)
				index[g.domain] = i
				nu.Domains = append(nu.Domains, report.DomainUse{Name: g.domain})
			}
			nu.Domains[i].GPUs = append(nu.Domains[i].GPUs, min(1, used[g.physical]))
		}
		out = append(out, nu)
	}
	return out
}
