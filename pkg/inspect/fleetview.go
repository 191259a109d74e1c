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
// each device is and which GPU it lives on, and each node's whole GPUs
// in order.
type FleetView struct {
	devices map[string]viewDevice // pool/device
	nodes   map[string][]gpuEntry // node -> whole GPUs in published order
	shapes  map[string]string
}

type viewDevice struct {
	gpu      topology.GPU
	physical string  // uuid of the GPU it lives on
	share    float64 // of its GPU a device takes whole (MIG: topology.PartitionShare)
	shared   bool
}

type gpuEntry struct{ uuid, domain string }

// NewFleetView indexes the devices of the slices on the nodes that shapes
// names (node -> a label for its kind, such as "dgx-h100"); a nil shapes
// keeps every node, labelled by its GPUs' product.
func NewFleetView(published []resourceapi.ResourceSlice, shapes map[string]string) FleetView {
	v := FleetView{devices: map[string]viewDevice{}, nodes: map[string][]gpuEntry{}, shapes: shapes}
	if shapes == nil {
		v.shapes = map[string]string{}
	}
	counterSets := map[string]map[string]resourceapi.CounterSet{} // pool -> set name -> set
	for _, s := range published {
		for _, cs := range s.Spec.SharedCounters {
			if counterSets[s.Spec.Pool.Name] == nil {
				counterSets[s.Spec.Pool.Name] = map[string]resourceapi.CounterSet{}
			}
			counterSets[s.Spec.Pool.Name][cs.Name] = cs
		}
	}
	for _, s := range published {
		node := ptr.Deref(s.Spec.NodeName, "")
		if _, ok := v.shapes[node]; !ok && (shapes != nil || node == "") {
			continue
		}
		for _, d := range s.Spec.Devices {
			g := topology.Describe(s.Spec.Driver, node, d.Attributes)
			dev := viewDevice{gpu: g, physical: g.Physical, share: 1, shared: ptr.Deref(d.AllowMultipleAllocations, false)}
			if g.Partition {
				dev.share = topology.PartitionShare(&d, counterSets[s.Spec.Pool.Name])
			} else {
				domain := g.NVLinkDomain
				if domain == "" {
					domain = "pcie"
				}
				v.nodes[node] = append(v.nodes[node], gpuEntry{g.Physical, domain})
				if shapes == nil && v.shapes[node] == "" {
					v.shapes[node] = model(d, s.Spec.Driver)
				}
			}
			v.devices[s.Spec.Pool.Name+"/"+d.Name] = dev
		}
	}
	return v
}

// GPU is the device pool/device as the topology sees it.
func (v FleetView) GPU(poolDevice string) (topology.GPU, bool) {
	d, ok := v.devices[poolDevice]
	return d.gpu, ok
}

// Occupancy is each GPU's used share: whole devices count 1, MIG
// partitions their memory slices, shares their compute percentage.
func (v FleetView) Occupancy(claims []resourceapi.ResourceClaim) []report.NodeUse {
	used := map[string]float64{} // GPU uuid
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			d, ok := v.devices[res.Pool+"/"+res.Device]
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
			nu.Domains[i].GPUs = append(nu.Domains[i].GPUs, min(1, used[g.uuid]))
		}
		out = append(out, nu)
	}
	return out
}
