package allocator

import (
	"fmt"
	"math"
	"sync"

	"github.com/gputopo/gputopo/pkg/topology"
	"k8s.io/utils/ptr"
)

// Quality explains an allocation on one node. "Before" values describe the
// node without this pod, the others with it.
type Quality struct {
	// Score is the policy objective of the chosen solution on this node;
	// only comparable between solutions on the same node.
	Score float64
	// MultiDevice is true when some claim got two or more devices that
	// publish topology; WorstLink is then the worst pair class among them.
	MultiDevice bool
	WorstLink   topology.LinkClass
	// Intactness of free NVLink groups (topology.Intactness).
	Intactness, IntactnessBefore float64
	// MIGPlaceable is the sum of squared sizes of partitions that still fit.
	MIGPlaceable, MIGPlaceableBefore float64
	// Fragmentation of shared devices, in GPUs (topology.Fragmentation).
	Fragmentation, FragmentationBefore float64
	// Explored counts the complete solutions compared.
	Explored int
}

func (q Quality) String() string {
	link := "-"
	if q.MultiDevice {
		link = q.WorstLink.String()
	}
	return fmt.Sprintf("link=%s intactness=%.3f->%.3f migPlaceable=%.2f->%.2f fragmentation=%.3f->%.3f explored=%d",
		link, q.IntactnessBefore, q.Intactness, q.MIGPlaceableBefore, q.MIGPlaceable, q.FragmentationBefore, q.Fragmentation, q.Explored)
}

// NodeScore maps the quality to 0..100 for comparing nodes: the best link
// class for multi-device claims, then the least damage to intact NVLink
// groups, MIG placeability and shared-capacity fragmentation.
func (q Quality) NodeScore() int64 {
	s := 100.0
	if q.MultiDevice {
		s -= 10 * float64(q.WorstLink-topology.LinkSameGPU)
	}
	s -= 20 * math.Max(0, q.IntactnessBefore-q.Intactness)
	s -= 10 * math.Max(0, q.MIGPlaceableBefore-q.MIGPlaceable)
	s -= 20 * math.Max(0, q.Fragmentation-q.FragmentationBefore)
	return int64(math.Round(math.Max(0, math.Min(100, s))))
}

// solution is a complete allocation found by the search.
type solution struct {
	picks   [][]pick
	subs    [][]int
	quality Quality
}

// better: a more preferred firstAvailable alternative always wins (the
// user's order), then the higher policy score.
func (a *solution) better(b *solution) bool {
	for c := range a.subs {
		for g := range a.subs[c] {
			if a.subs[c][g] != b.subs[c][g] {
				return a.subs[c][g] < b.subs[c][g]
			}
		}
	}
	return a.quality.Score > b.quality.Score+1e-9
}

func (r *run) snapshot() *solution {
	sol := &solution{picks: make([][]pick, len(r.picks)), subs: make([][]int, len(r.curSub))}
	for i := range r.picks {
		sol.picks[i] = append([]pick(nil), r.picks[i]...)
		sol.subs[i] = append([]int(nil), r.curSub[i]...)
	}
	if r.pol.anyEnabled() {
		sol.quality = r.evaluate()
	}
	return sol
}

// gpu returns the link-model view of a device, computed once.
func (d *device) gpu() topology.GPU {
	d.gpuOnce.Do(func() {
		d.gpuDesc = topology.Describe(d.slice.Spec.Driver, ptr.Deref(d.slice.Spec.NodeName, ""), d.api.Attributes)
	})
	return d.gpuDesc
}

// roles lists, once per node view, the devices each criterion looks at.
type roles struct {
	once      sync.Once
	wholeGPUs []int // devices with topology that are not partitions
	shared    []int // allow-multiple devices with capacity
	counted   []int // pools with shared counters
}

func (v *nodeView) roles() *roles {
	v.role.once.Do(func() {
		for i, d := range v.devices {
			g := d.gpu()
			if !g.Partition && g.HasTopology() {
				v.role.wholeGPUs = append(v.role.wholeGPUs, i)
			}
			if d.multi && len(d.api.Capacity) > 0 {
				v.role.shared = append(v.role.shared, i)
			}
		}
		for pi, p := range v.pools {
			if len(p.counterTotal) > 0 {
				v.role.counted = append(v.role.counted, pi)
			}
		}
	})
	return &v.role
}

// evaluate scores the current complete state of the run.
func (r *run) evaluate() Quality {
	var q Quality
	if r.before == nil {
		b := r.measure(false)
		r.before = &b
	}
	q.IntactnessBefore, q.MIGPlaceableBefore, q.FragmentationBefore = r.before.Intactness, r.before.MIGPlaceable, r.before.Fragmentation
	after := r.measure(true)
	q.Intactness, q.MIGPlaceable, q.Fragmentation = after.Intactness, after.MIGPlaceable, after.Fragmentation

	cost := 0
	for c := range r.picks {
		var set []topology.GPU
		for _, pk := range r.picks[c] {
			if g := r.view.devices[pk.dev].gpu(); g.HasTopology() {
				set = append(set, g)
			}
		}
		if len(set) < 2 {
			continue
		}
		w := topology.WorstPair(set)
		if !q.MultiDevice || w > q.WorstLink {
			q.WorstLink = w
		}
		q.MultiDevice = true
		cost += int(w)
	}
	if p := r.pol.Topology; p.Enabled {
		q.Score += p.Weight * (q.Intactness - 10*float64(cost))
	}
	if p := r.pol.MIG; p.Enabled {
		q.Score += p.Weight * (q.MIGPlaceable - q.MIGPlaceableBefore + lookaheadWeight*r.lookahead())
	}
	if p := r.pol.Packing; p.Enabled {
		q.Score -= p.Weight * (q.Fragmentation - q.FragmentationBefore)
	}
	return q
}

// measure computes the node-wide criteria without (withRun false) or with
// this run's tentative allocations.
func (r *run) measure(withRun bool) Quality {
	var q Quality
	ro := r.view.roles()
	if r.pol.Topology.Enabled && len(ro.wholeGPUs) > 0 {
		free := make([]topology.GPU, 0, len(ro.wholeGPUs))
		for _, d := range ro.wholeGPUs {
			if r.free(d, withRun) {
				free = append(free, r.view.devices[d].gpu())
			}
		}
		q.Intactness = topology.Intactness(free, len(ro.wholeGPUs))
	}
	if r.pol.MIG.Enabled {
		for _, pi := range ro.counted {
			q.MIGPlaceable += r.placeable(pi, withRun)
		}
	}
	if r.pol.Packing.Enabled && len(ro.shared) > 0 {
		free := make([]float64, 0, len(ro.shared))
		for _, d := range ro.shared {
			free = append(free, r.freeShare(d, withRun))
		}
		q.Fragmentation = topology.Fragmentation(free, r.pol.Workload)
	}
	return q
}

// free reports whether a device could be allocated whole right now.
func (r *run) free(d int, withRun bool) bool {
	dv := r.view.devices[d]
	if r.s.holds(dv) || (withRun && (len(r.owners[d]) > 0 || r.shares[d] > 0)) {
		return false
	}
	if len(dv.api.ConsumesCounters) == 0 {
		return true
	}
	if !r.f.PartitionableDevices {
		return false
	}
	pi, li := r.view.locate(d)
	return r.fitsCounters(pi, r.view.pools[pi].usesOf(li), withRun)
}

func (r *run) fitsCounters(pi int, uses []counterUse, withRun bool) bool {
	pc := r.s.countersOf(r.view.pools[pi])
	if pc.overdrawn {
		return false
	}
	for _, u := range uses {
		need := u.milli
		if withRun {
			need += r.used[pi][u.idx]
		}
		if need > pc.avail[u.idx] {
			return false
		}
	}
	return true
}

// freeShare is the unused fraction of a shared device's most used capacity.
func (r *run) freeShare(d int, withRun bool) float64 {
	dv := r.view.devices[d]
	held := r.s.state.AggregatedCapacity[dv.id]
	used := 0.0
	for name, c := range dv.api.Capacity {
		total := c.Value.AsApproximateFloat64()
		if total <= 0 {
			continue
		}
		u := 0.0
		if h, ok := held[name]; ok && h != nil {
			u += h.AsApproximateFloat64()
		}
		if withRun {
			if p, ok := r.pending[d][name]; ok {
				u += p.AsApproximateFloat64()
			}
		}
		used = math.Max(used, u/total)
	}
	if r.s.state.AllocatedDevices.Has(dv.id) || (withRun && len(r.owners[d]) > 0) {
		used = 1
	}
	return math.Max(0, 1-used)
}

// lookaheadWeight: the state after the next same-profile request counts
// twice as much as the state now. Measured on A100 streams
// (quality_test.go): with weight 1 a 2g stream splits both halves of a GPU
// and is refused a claim first-fit serves; with 2 it serves at least as
// many claims as first-fit on every stream tried.
const lookaheadWeight = 2.0
