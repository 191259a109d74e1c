package allocator

import "math/big"

// poolCounters is the available amount of every counter of a pool after
// what the ledger holds.
//
// Upstream lets a device consume counters only if afterwards no counter
// of the pool, whether the device consumes it or not, is consumed beyond
// what is available. Counters in deficit (less than nothing available: a
// negative total, or a ledger that overdraws) therefore block every
// counter-consuming device, unless the run's negative consumptions make
// up for the deficit; every other counter stays within its amount after
// each take, so only the device's own counters and the deficits need
// checking.
type poolCounters struct {
	avail []int64
	// availExact is avail exactly, for a pool with exact amounts; then
	// avail are approximations for scoring.
	availExact []*big.Int
	// deficit lists the counters with less than nothing available;
	// overdrawn is len(deficit) > 0 (scoring reads it).
	deficit   []int
	overdrawn bool
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
	if p.exact != nil {
		pc.availExact = make([]*big.Int, len(p.exact.total))
		for i, t := range p.exact.total {
			pc.availExact[i] = new(big.Int).Set(t)
		}
	}
	charge := func(devs []*device, uses [][]counterUse, exact [][]*big.Int) {
		for i, d := range devs {
			if !s.holds(d) {
				continue
			}
			for j, u := range uses[i] {
				pc.avail[u.idx] -= u.milli
				if exact != nil {
					pc.availExact[u.idx].Sub(pc.availExact[u.idx], exact[i][j])
				}
			}
		}
	}
	if p.uses != nil {
		var uses, others [][]*big.Int
		if p.exact != nil {
			uses, others = p.exact.uses, p.exact.otherUses
		}
		charge(p.devices, p.uses, uses)
		charge(p.others, p.otherUses, others)
	}
	for i, v := range pc.avail {
		if (pc.availExact == nil && v < 0) || (pc.availExact != nil && pc.availExact[i].Sign() < 0) {
			pc.deficit = append(pc.deficit, i)
		}
	}
	pc.overdrawn = len(pc.deficit) > 0
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

// countersFit reports whether the consumption of device li of pool pi
// fits in what the ledger and this run leave of the pool's counters.
func (r *run) countersFit(pi, li int) bool {
	pc := r.countersOf(pi)
	if r.exact != nil && r.exact[pi] != nil {
		return r.exact[pi].fits(r, pi, li)
	}
	// counterBound keeps every sum here within int64 (see exactRuns).
	used, uses := r.used[pi], r.view.pools[pi].usesOf(li)
	need := func(c int) int64 {
		n := used[c]
		// A device may list one counter twice; count both.
		for _, u := range uses {
			if u.idx == c {
				n += u.milli
			}
		}
		return n
	}
	for _, u := range uses {
		if need(u.idx) > pc.avail[u.idx] {
			return false
		}
	}
	for _, c := range pc.deficit {
		if need(c) > pc.avail[c] {
			return false
		}
	}
	return true
}

// addCounters adds (sign 1) or removes (sign -1) the consumption of
// device li of pool pi to what this run uses.
func (r *run) addCounters(pi, li int, sign int64) {
	p := r.view.pools[pi]
	used := r.used[pi]
	for _, u := range p.usesOf(li) {
		used[u.idx] += sign * u.milli
	}
	if r.exact != nil && r.exact[pi] != nil {
		r.exact[pi].add(p, li, sign)
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

// exactRun is a run's exact counter state for one pool whose sums could
// leave int64: the pool has exact amounts, or the run has enough claims
// (each may take an admin-access device again) to add beyond int64.
type exactRun struct {
	avail, used []*big.Int
	need        big.Int // scratch
}

// exactRuns returns, per pool of the view, the exact state for the pools
// that need one, or nil when none does (the usual case).
func (r *run) exactRuns() []*exactRun {
	var out []*exactRun
	claims := float64(len(r.s.plans) + 1)
	for pi, p := range r.view.pools {
		if len(p.counterTotal) == 0 || p.counterBound*claims < int64Safe {
			continue
		}
		if out == nil {
			out = make([]*exactRun, len(r.view.pools))
		}
		out[pi] = &exactRun{}
	}
	return out
}

// fits is countersFit with exact amounts; the available amounts are
// taken from the session on first use.
func (e *exactRun) fits(r *run, pi, li int) bool {
	p := r.view.pools[pi]
	if e.avail == nil {
		pc := r.countersOf(pi)
		e.avail, e.used = pc.availExact, make([]*big.Int, len(p.counterTotal))
		if e.avail == nil {
			e.avail = make([]*big.Int, len(pc.avail))
			for i, v := range pc.avail {
				e.avail[i] = big.NewInt(v)
			}
		}
		for i := range e.used {
			e.used[i] = new(big.Int)
		}
	}
	uses, amounts := p.usesOf(li), exactAmounts(p, li)
	fits := func(c int) bool {
		e.need.Set(e.used[c])
		for i, u := range uses {
			if u.idx == c {
				e.need.Add(&e.need, amounts[i])
			}
		}
		return e.need.Cmp(e.avail[c]) <= 0
	}
	for _, u := range uses {
		if !fits(u.idx) {
			return false
		}
	}
	for _, c := range r.countersOf(pi).deficit {
		if !fits(c) {
			return false
		}
	}
	return true
}

// add adds (sign 1) or removes (sign -1) a device's consumption; fits
// has always run before for the pool, so used is set.
func (e *exactRun) add(p *pool, li int, sign int64) {
	uses := p.usesOf(li)
	for i, a := range exactAmounts(p, li) {
		u := e.used[uses[i].idx]
		if sign > 0 {
			u.Add(u, a)
		} else {
			u.Sub(u, a)
		}
	}
}

// exactAmounts returns the exact amounts device li of pool p consumes,
// in p.uses[li]'s order: the big ones of a pool that has them, the
// int64s otherwise.
func exactAmounts(p *pool, li int) []*big.Int {
	if p.exact != nil {
		return p.exact.uses[li]
	}
	uses := p.usesOf(li)
	out := make([]*big.Int, len(uses))
	for i, u := range uses {
		out[i] = big.NewInt(u.milli)
	}
	return out
}
