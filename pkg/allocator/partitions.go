package allocator

import (
	"cmp"
	"math"
	"slices"
)

// Partition placeability (MIG and other partitionable devices, KEP-4815).
//
// The devices that consume one counter set are the placements of a
// partitioned device (a GPU's MIG profiles at their real offsets). Devices
// of the same size are the placements of one profile; they rarely overlap
// each other. How much a state can still host is measured per profile as
// the number of placements that fit at the same time (greedy, which is
// exact for non-overlapping placements), weighted by the square of the
// profile's size so that keeping one large profile placeable outweighs
// keeping several small ones.

// maxCounterWeight caps what one counter weighs in a device's size: its
// total, in milli-units, up to 8 units, a GPU's memory slices. gputopo's
// node agent counts compute slices (7) and memory slices (1 each), which
// weigh their totals; NVIDIA's DRA driver counts memory in bytes and
// streaming multiprocessors by the hundred, which would otherwise drown
// the rest, so that profiles of one memory size (3g.40gb and 4g.40gb)
// read as one and the measure could not tell their placements apart.
const maxCounterWeight = 8000

// consumedWeight is what consuming milli of a counter with this total
// adds to a size: milli itself when the counter weighs its total.
func consumedWeight(milli, total int64, weight float64) float64 {
	if float64(total) <= weight {
		return float64(milli)
	}
	return float64(milli) / float64(total) * weight
}

// shape is the placements of one size within one counter set.
type shape struct {
	set     int
	size    float64
	devices []int // indices into pool.devices
}

// buildShapes groups the pool's devices that consume exactly one counter
// set by set and size, largest first.
func (p *pool) buildShapes() {
	p.counterSet = make([]int, len(p.counterNames))
	setIndex := map[string]int{}
	for i, k := range p.counterNames {
		si, ok := setIndex[k.set]
		if !ok {
			si = len(setIndex)
			setIndex[k.set] = si
		}
		p.counterSet[i] = si
	}
	// A device's size is what it consumes of the counter sets it
	// touches, as a fraction of those sets' totals, each counter weighing
	// its total up to maxCounterWeight.
	weight := make([]float64, len(p.counterTotal))
	setTotal := make([]float64, len(setIndex))
	for i, t := range p.counterTotal {
		weight[i] = math.Min(float64(t), maxCounterWeight)
		setTotal[p.counterSet[i]] += weight[i]
	}
	p.size = make([]float64, len(p.devices))
	for li := range p.devices {
		var used, total float64
		var seen uint64 // sets already counted, for the first 64 sets
		for _, u := range p.usesOf(li) {
			used += consumedWeight(u.milli, p.counterTotal[u.idx], weight[u.idx])
			si := p.counterSet[u.idx]
			if si < 64 && seen&(1<<si) != 0 {
				continue
			}
			if si < 64 {
				seen |= 1 << si
			}
			total += setTotal[si]
		}
		if total > 0 {
			// Negative amounts (valid input) would make a negative size.
			p.size[li] = math.Max(0, math.Min(1, used/total))
		}
	}
	p.shapes = make([][]shape, len(setIndex))
	for li := range p.devices {
		uses := p.usesOf(li)
		if len(uses) == 0 || p.devices[li].multi {
			continue
		}
		si := p.counterSet[uses[0].idx]
		single := true
		for _, u := range uses {
			single = single && p.counterSet[u.idx] == si
		}
		if !single {
			continue
		}
		size := math.Round(p.size[li]*1000) / 1000
		j := slices.IndexFunc(p.shapes[si], func(s shape) bool { return s.size == size })
		if j < 0 {
			p.shapes[si] = append(p.shapes[si], shape{set: si, size: size})
			j = len(p.shapes[si]) - 1
		}
		p.shapes[si][j].devices = append(p.shapes[si][j].devices, li)
	}
	p.shapeOf = make([]*shape, len(p.devices))
	for si := range p.shapes {
		slices.SortFunc(p.shapes[si], func(a, b shape) int { return cmp.Compare(b.size, a.size) })
		for j := range p.shapes[si] {
			for _, li := range p.shapes[si][j].devices {
				p.shapeOf[li] = &p.shapes[si][j]
			}
		}
	}
}

// setPlaceable measures one counter set of pool pi, without (withRun
// false) or with this run's tentative allocations.
//
// extra, when not negative, is one more device of the pool taken on top
// of the run (the lookahead in lookahead).
func (r *run) setPlaceable(pi, si int, withRun bool, extra int) float64 {
	p := r.view.pools[pi]
	pc := r.countersOf(pi)
	if pc.overdrawn {
		return 0
	}
	if cap(r.freeBuf) < len(pc.avail) {
		r.freeBuf = make([]int64, len(pc.avail))
		r.tentBuf = make([]int64, len(pc.avail))
	}
	free, tentative := r.freeBuf[:len(pc.avail)], r.tentBuf[:len(pc.avail)]
	copy(free, pc.avail)
	if withRun {
		for i, u := range r.used[pi] {
			free[i] -= u
		}
	}
	if extra >= 0 {
		for _, u := range p.uses[extra] {
			free[u.idx] -= u.milli
		}
	}
	sum := 0.0
	for _, sh := range p.shapes[si] {
		clear(tentative)
		n := 0
		for _, li := range sh.devices {
			d := p.first + li
			if li == extra || r.ledgerHolds(d) || (withRun && len(r.owners[d]) > 0) {
				continue
			}
			uses := p.uses[li]
			fits := true
			for _, u := range uses {
				if tentative[u.idx]+u.milli > free[u.idx] {
					fits = false
					break
				}
			}
			if !fits {
				continue
			}
			for _, u := range uses {
				tentative[u.idx] += u.milli
			}
			n++
		}
		sum += float64(n) * sh.size * sh.size
	}
	return sum
}

// placeable sums setPlaceable over the pool's counter sets; with the run,
// only sets the run touched are measured again.
func (r *run) placeable(pi int, withRun bool) float64 {
	p := r.view.pools[pi]
	if r.setBefore == nil {
		r.setBefore = make(map[[2]int]float64)
	}
	var touched []bool
	if withRun {
		touched = make([]bool, len(p.shapes))
		for i, u := range r.used[pi] {
			if u != 0 {
				touched[p.counterSet[i]] = true
			}
		}
	}
	sum := 0.0
	for si := range p.shapes {
		b, ok := r.setBefore[[2]int{pi, si}]
		if !ok {
			b = r.setPlaceable(pi, si, false, -1)
			r.setBefore[[2]int{pi, si}] = b
		}
		if withRun && touched[si] {
			sum += r.setPlaceable(pi, si, true, -1)
			continue
		}
		sum += b
	}
	return sum
}

// lookahead values the state one request later: requests for partitions
// come in bursts of one profile, so for every profile this run placed it
// adds how placeable the set stays after the best next placement of the
// same profile. This keeps a second 2g from landing where it splits the
// last free half, which a one-step measure cannot see.
func (r *run) lookahead() float64 {
	sum := 0.0
	seen := map[*shape]bool{}
	for c := range r.picks {
		for _, pk := range r.picks[c] {
			pi, li := r.view.locate(pk.dev)
			p := r.view.pools[pi]
			if p.shapeOf == nil || p.shapeOf[li] == nil || seen[p.shapeOf[li]] {
				continue
			}
			sh := p.shapeOf[li]
			seen[sh] = true
			best := 0.0
			for _, next := range sh.devices {
				d := p.first + next
				if r.ledgerHolds(d) || len(r.owners[d]) > 0 || !r.fitsCounters(pi, p.uses[next], true) {
					continue
				}
				best = math.Max(best, r.setPlaceable(pi, sh.set, true, next))
			}
			sum += best
		}
	}
	return sum
}

// lookaheadWeight: the state after the next same-profile request counts
// twice as much as the state now. Measured on A100 streams
// (quality_test.go): with weight 1 a 2g stream splits both halves of a GPU
// and is refused a claim first-fit serves; with 2 it serves at least as
// many claims as first-fit on every stream tried.
const lookaheadWeight = 2.0
