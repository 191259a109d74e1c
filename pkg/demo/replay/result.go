package replay

import (
	"context"
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
	"github.com/gputopo/gputopo/pkg/topology"
)

// device is one published device as the report needs it.
type device struct {
	gpu      topology.GPU
	physical string  // uuid of the GPU it lives on
	share    float64 // of its GPU a device takes whole (MIG: resources.PartitionShare)
	shared   bool
}

// fleetView indexes the slices of one copy of the fleet.
type fleetView struct {
	devices map[string]device     // pool/device
	nodes   map[string][]gpuEntry // node -> whole GPUs in order
	shapes  map[string]string
}

type gpuEntry struct{ uuid, domain string }

func viewOf(slices []resourceapi.ResourceSlice, nodes map[string]string) fleetView {
	v := fleetView{devices: map[string]device{}, nodes: map[string][]gpuEntry{}, shapes: nodes}
	counterSets := map[string]map[string]resourceapi.CounterSet{} // pool -> set name -> set
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			if counterSets[s.Spec.Pool.Name] == nil {
				counterSets[s.Spec.Pool.Name] = map[string]resourceapi.CounterSet{}
			}
			counterSets[s.Spec.Pool.Name][cs.Name] = cs
		}
	}
	for _, s := range slices {
		node := ptr.Deref(s.Spec.NodeName, "")
		if _, ok := nodes[node]; !ok {
			continue
		}
		for _, d := range s.Spec.Devices {
			g := topology.Describe(s.Spec.Driver, node, d.Attributes)
			dev := device{gpu: g, physical: g.Physical, share: 1, shared: ptr.Deref(d.AllowMultipleAllocations, false)}
			if g.Partition {
				dev.share = resources.PartitionShare(&d, counterSets[s.Spec.Pool.Name])
			} else {
				domain := g.NVLinkDomain
				if domain == "" {
					domain = "pcie"
				}
				v.nodes[node] = append(v.nodes[node], gpuEntry{g.Physical, domain})
			}
			v.devices[s.Spec.Pool.Name+"/"+d.Name] = dev
		}
	}
	return v
}

// Result turns an outcome into the report's figures. nodes maps the
// copy's node names to their shape.
func Result(ctx context.Context, client kubernetes.Interface, w Workload, out *Outcome, nodes map[string]string) (report.Result, error) {
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return report.Result{}, err
	}
	claims, err := client.ResourceV1().ResourceClaims(out.Target.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return report.Result{}, err
	}
	v := viewOf(slices.Items, nodes)
	r := report.Result{Name: out.Target.Name, Duration: out.Duration, LinkClasses: map[string]int{}, Pending: map[string]int{}}
	for _, c := range topology.LinkClasses() {
		r.LinkClassOrder = append(r.LinkClassOrder, c.String())
	}
	served := map[string][2]int{} // kind -> served, arrived
	for _, p := range out.Pods {
		kind := w.Templates[p.Template].Kind
		s := served[kind]
		s[1]++
		if p.Bound || p.Left && len(p.Devices) > 0 {
			s[0]++
		}
		served[kind] = s
		switch {
		case p.Left:
		case p.Bound:
			r.PodsPlaced++
		default:
			r.PodsPending++
			r.Pending[p.Reason]++
		}
		if len(p.Devices) >= 2 && (p.Bound || p.Left) {
			var set []topology.GPU
			for _, d := range p.Devices {
				set = append(set, v.devices[d].gpu)
			}
			r.LinkClasses[topology.WorstPair(set).String()]++
		}
	}
	if out.Duration > 0 {
		r.PodsPerSecond = float64(r.PodsPlaced) / out.Duration.Seconds()
	}
	for _, pt := range out.Curve {
		r.Curve = append(r.Curve, report.Point{ArrivedPercent: pt.ArrivedPercent, UnallocatedPercent: pt.UnallocatedPercent})
	}
	if n := len(out.Curve); n > 0 {
		r.UnallocatedGPUPercent = out.Curve[n-1].UnallocatedPercent
	}
	r.Nodes = occupancy(v, claims.Items)
	kinds := make([]string, 0, len(served))
	for k := range served {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		s := served[k]
		r.Extra = append(r.Extra, report.Figure{Label: k + " requests served", Value: float64(s[0]), Unit: fmt.Sprintf("of %d", s[1])})
	}
	if departs(w) && len(out.Curve) > 0 {
		// With departures the GPUs left unallocated at the end say little;
		// what the fleet held over the run does.
		r.Extra = append(r.Extra, report.Figure{Label: "GPUs held, averaged over the steps", Value: heldPercent(out.Curve), Unit: "%"})
	}
	return r, nil
}

// departs reports whether some pods of the workload leave.
func departs(w Workload) bool {
	for _, g := range w.Pods {
		if g.Leave != 0 {
			return true
		}
	}
	return false
}

// heldPercent is the share of the GPUs in use after each step, averaged
// over the steps.
func heldPercent(curve []Point) float64 {
	sum := 0.0
	for _, p := range curve {
		sum += 100 - p.UnallocatedPercent
	}
	return sum / float64(len(curve))
}

// occupancy is each GPU's used share at the end: whole devices count 1,
// MIG partitions their memory slices, shares their compute percentage.
func occupancy(v fleetView, claims []resourceapi.ResourceClaim) []report.NodeUse {
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
