package allocator

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Counters are kept as int64 milli-units: exact for every integer or
// milli-precise quantity below about 9.2e15, which covers counters seen in
// practice (slices, multiprocessors, bytes of memory). Values beyond that
// saturate; values finer than a milli-unit round against the device
// (capacity down, consumption up).
const counterLimit = math.MaxInt64 / 4

func milliFloor(q resource.Quantity) int64 {
	if q.CmpInt64(counterLimit/1000) > 0 {
		return counterLimit
	}
	m := q.MilliValue() // rounds up
	if resource.NewMilliQuantity(m, q.Format).Cmp(q) > 0 {
		m--
	}
	return m
}

func milliCeil(q resource.Quantity) int64 {
	if q.CmpInt64(counterLimit/1000) > 0 {
		return counterLimit
	}
	return q.MilliValue()
}

// poolCounters is the available amount of every counter of a pool after
// what the ledger holds, and a flag for a pool whose ledger already
// overdraws some counter (then no counter-consuming device fits, as
// upstream checks every counter of the pool on each allocation).
type poolCounters struct {
	avail     []int64
	overdrawn bool
}

func addSat(a, b int64) int64 {
	if s := a + b; s < counterLimit {
		return s
	}
	return counterLimit
}

// countersOf returns the pool's counters left after the ledger, computing
// them once per session. A device consumes counters while it holds an
// exclusive allocation, a share, or consumed capacity.
func (s *Session) countersOf(p *pool) *poolCounters {
	s.mu.Lock()
	pc, ok := s.counters[p]
	s.mu.Unlock()
	if ok {
		return pc
	}
	pc = &poolCounters{avail: append([]int64(nil), p.counterTotal...)}
	charge := func(devs []*device, uses [][]counterUse) {
		if uses == nil {
			return
		}
		for i, d := range devs {
			if !s.holds(d) {
				continue
			}
			for _, u := range uses[i] {
				pc.avail[u.idx] -= u.milli
			}
		}
	}
	charge(p.devices, p.uses)
	charge(p.others, p.otherUses)
	for _, v := range pc.avail {
		if v < 0 {
			pc.overdrawn = true
		}
	}
	s.mu.Lock()
	s.counters[p] = pc
	s.mu.Unlock()
	return pc
}

// holds reports whether the ledger has any allocation of the device.
func (s *Session) holds(d *device) bool {
	if s.state.AllocatedDevices.Has(d.id) || s.shared[d.id] {
		return true
	}
	if s.legacy {
		return false
	}
	_, ok := s.state.AggregatedCapacity[d.id]
	return ok
}

// countersFit reports whether a device's consumption fits in what the
// ledger and this run leave of its pool's counters.
func (r *run) countersFit(pi int, uses []counterUse) bool {
	pc := r.countersOf(pi)
	if pc.overdrawn {
		return false
	}
	used := r.used[pi]
	for i, u := range uses {
		need := addSat(used[u.idx], u.milli)
		// A device may list one counter twice; count both.
		for _, v := range uses[:i] {
			if v.idx == u.idx {
				need = addSat(need, v.milli)
			}
		}
		if need > pc.avail[u.idx] {
			return false
		}
	}
	return true
}

func (r *run) addCounters(pi int, uses []counterUse, sign int64) {
	used := r.used[pi]
	for _, u := range uses {
		used[u.idx] += sign * u.milli
	}
}

// countersOf is Session.countersOf for the run's pool pi, cached in the
// run: Filter asks for it once per candidate and per scored solution,
// and the session's copy sits behind a mutex shared by all nodes.
func (r *run) countersOf(pi int) *poolCounters {
	if r.pc == nil {
		r.pc = make([]*poolCounters, len(r.view.pools))
	}
	if r.pc[pi] == nil {
		r.pc[pi] = r.s.countersOf(r.view.pools[pi])
	}
	return r.pc[pi]
}
