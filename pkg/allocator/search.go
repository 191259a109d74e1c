package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/topology"
)

// The search is a depth-first walk over claims, requests and devices in
// exactly upstream's order: requests in claim order, firstAvailable
// alternatives in order, candidate devices in pool/slice/device order,
// each request's devices as combinations (increasing positions). Until it
// finds the first solution it behaves like upstream in every respect,
// including which input errors it reports. After that it keeps walking
// within the policy's budget, scores every further solution and keeps the
// best; errors met then only rule the device out, since upstream would
// already have returned the first solution.

// errMaxSize marks a branch that would exceed AllocationResultsMaxSize
// devices in one claim; a shorter firstAvailable alternative may still fit.
var errMaxSize = errors.New("allocation result max size exceeded")

// errStop unwinds the search once the budget is spent.
var errStop = errors.New("search budget spent")

type run struct {
	s    *Session
	ctx  context.Context
	node *v1.Node
	view *nodeView
	f    Features
	pol  Policy
	host *HostUse // nil: the node's CPU and memory are not counted

	owners [][]int32 // per device: claims allocating it exclusively
	// exclusive and holding cache ledger lookups per device:
	// 0 unknown, 1 yes, 2 no.
	exclusive []int8
	holding   []int8
	pending   [][]resource.Quantity // per device, in capNames order
	pendingF  [][]float64
	shares    []int32         // per device: pending shares in this run
	used      [][]int64       // per pool: counters consumed in this run
	exact     []*exactRun     // per pool: exact counters, nil if none needs them
	pc        []*poolCounters // per pool: Session.countersOf, cached
	// selection answers selectable, with the view's memo of selector
	// results; capSlots holds, per req, its memo of capacity fits.
	*selection
	capSlots [][]atomic.Pointer[capFit]
	caps     [][]*capFit // per req, per device, when consumable capacity is on
	cons     [][]constraint
	picks    [][]pick
	allDevs  [][]int // per req (All mode): candidate devices
	num      []int   // per req: devices needed
	curSub   [][]int // per claim, per group: alternative in use

	// deadline is WithDeadline's, zero for none; polls counts the looks
	// at it (deadline.go).
	deadline time.Time
	polls    int
	// skipTwins: the search may skip twins (twins.go).
	skipTwins bool
	found     bool
	cut       bool // the search stopped at the deadline or cancellation
	tooMany   bool // some branch would pass a claim's limit of devices
	steps     int
	explored  int
	best      *solution
	failed    []failurePart // why nothing fit, once the search found nothing
	before    *Quality
	// gpusBefore caches freeGPUs(false) for host pressure; -1 unknown.
	gpusBefore float64
	// setBefore caches setPlaceable without the run, per pool and set.
	setBefore map[[2]int]float64
	// Scratch space for scoring, reused across leaves.
	intactScratch []int
	// linkScratch: an extended-resource claim's picks by container
	// (linkGroups).
	linkScratch []pick
	fragScratch []float64
	// nodeFrag is the workload on the node's host without and with the
	// run (measure's withRun), built on first use.
	nodeFrag   [2]*topology.NodeFragmentation
	shareBases []shareBase
	freeBuf    []int64
	tentBuf    []int64
}

type pick struct {
	dev      int
	q        *req
	shared   bool // a share of an allow-multiple device; gets a share ID
	counted  bool // the pick added its device's counters to the run's
	consumed map[resourceapi.QualifiedName]resource.Quantity
}

// newRun prepares a search on node, starting from what sel knows.
func (s *Session) newRun(ctx context.Context, node *v1.Node, view *nodeView, sel *selection) (*run, error) {
	r := &run{
		s: s, ctx: ctx, node: node, view: view, f: s.eng.features, pol: s.eng.policy, selection: sel,
		owners:     make([][]int32, len(view.devices)),
		exclusive:  make([]int8, len(view.devices)),
		holding:    make([]int8, len(view.devices)),
		used:       make([][]int64, len(view.pools)),
		cons:       make([][]constraint, len(s.plans)),
		picks:      make([][]pick, len(s.plans)),
		allDevs:    make([][]int, len(s.reqs)),
		num:        make([]int, len(s.reqs)),
		curSub:     make([][]int, len(s.plans)),
		gpusBefore: -1,
		deadline:   deadlineOf(ctx),
	}
	for i, p := range view.pools {
		if len(p.counterTotal) > 0 {
			r.used[i] = make([]int64, len(p.counterTotal))
		}
	}
	r.exact = r.exactRuns()
	r.skipTwins = !s.eng.noTwins && r.twinsUsable()
	for ci, p := range s.plans {
		r.curSub[ci] = make([]int, len(p.groups))
		minDevices := 0
		for _, g := range p.groups {
			minReq := -1
			for _, q := range g.alts {
				if err := r.prepareReq(q); err != nil {
					return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
				}
				if minReq < 0 || r.num[q.idx] < minReq {
					minReq = r.num[q.idx]
				}
			}
			if minReq > resourceapi.AllocationResultsMaxSize-minDevices {
				return nil, fmt.Errorf("%w: claim %s, request %s: adding %d devices exceeds the claim limit of %d, with %d already accounted for",
					ErrInvalidInput, klog.KObj(p.claim), g.alts[0].base, minReq, resourceapi.AllocationResultsMaxSize, minDevices)
			}
			minDevices += minReq
		}
		r.picks[ci] = make([]pick, 0, minDevices)
		r.cons[ci] = newConstraints(p.constraints)
	}
	return r, nil
}

// prepareReq sets how many devices a request needs; for "All" it lists
// them up front, failing when a pool of the node is incomplete or invalid.
func (r *run) prepareReq(q *req) error {
	if !q.all {
		r.num[q.idx] = q.count
		return nil
	}
	claim := r.s.plans[q.claim].claim
	for _, p := range r.view.pools {
		if p.incomplete {
			return fmt.Errorf("claim %s, request %s: asks for all devices, but resource pool %s is currently being updated", klog.KObj(claim), q.subOrBase(), p)
		}
		if p.invalid {
			return fmt.Errorf("claim %s, request %s: asks for all devices, but resource pool %s is currently invalid: %s", klog.KObj(claim), q.subOrBase(), p, p.invalidReason)
		}
		for i := range p.devices {
			dev := p.first + i
			ok, err := r.selectable(q, dev)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if r.f.ConsumableCapacity {
				d := r.view.devices[dev]
				fits, err := newCapFit(q.capacity, d, r.f.FractionalCapacityRange).fits(d, nil, nil)
				if err != nil {
					return fmt.Errorf("claim %s, request %s: checking capacity of ResourceSlice %s, device %s: %w", klog.KObj(claim), q.subOrBase(), d.slice.Name, d.api.Name, err)
				}
				if !fits {
					continue
				}
			}
			r.allDevs[q.idx] = append(r.allDevs[q.idx], dev)
		}
	}
	r.num[q.idx] = len(r.allDevs[q.idx])
	return nil
}

// solve runs the search and builds the result.
func (r *run) solve() (*Result, error) {
	_, err := r.step(0, 0, 0, false, 0, 0)
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, errMaxSize) {
		if r.best == nil {
			if r.ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
		// Cancelled after a solution was found: keep the best so far,
		// but not in the memo (another search may get further).
		r.cut = true
	}
	// A done context can also end the search unnoticed: CEL interrupts
	// comprehensions then, and after a first solution a selector error
	// only rules the device out. Such a solution stays out of the memo.
	if r.ctx.Err() != nil || (!r.deadline.IsZero() && time.Now().After(r.deadline)) {
		r.cut = true
	}
	if r.best == nil {
		r.failed = r.failure()
		return nil, unsatisfiable(r.view, r.s.failureMessage(r.failed))
	}
	return r.result(r.best, r.explored)
}

// result builds the Result of a solution that compared explored ones.
func (r *run) result(best *solution, explored int) (*Result, error) {
	allocs, err := r.build(best)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	q := best.quality
	q.Explored = explored
	for c := range r.s.plans {
		for g, grp := range r.s.plans[c].groups {
			if grp.hasSub {
				q.Fallbacks += best.subs[c][g]
			}
		}
	}
	return &Result{Allocations: allocs, Quality: q}, nil
}

// step allocates device number dev of request (claim c, group g,
// alternative sub), trying candidates from position start onwards.
func (r *run) step(c, g, sub int, inSub bool, dev, start int) (bool, error) {
	if r.found {
		r.steps++
		if r.steps > r.pol.SearchBudget {
			return false, errStop
		}
	}
	if err := r.checkAbort(); err != nil {
		return false, err
	}
	if c >= len(r.s.plans) {
		return r.leaf()
	}
	plan := &r.s.plans[c]
	if g >= len(plan.groups) {
		ok, err := r.step(c+1, 0, 0, false, 0, 0)
		if errors.Is(err, errMaxSize) {
			return false, nil
		}
		return ok, err
	}
	grp := &plan.groups[g]
	if grp.hasSub && !inSub {
		return r.stepAlternatives(c, g, grp)
	}

	q := grp.alts[sub]
	need := r.num[q.idx]
	if q.all && need == 0 {
		return false, nil
	}
	if dev >= need {
		return r.step(c, g+1, 0, false, 0, 0)
	}
	if need-dev > resourceapi.AllocationResultsMaxSize-len(r.picks[c]) {
		r.tooMany = true
		return false, errMaxSize
	}
	if q.all {
		return r.stepAll(c, g, sub, inSub, dev, q)
	}
	return r.stepCandidates(c, g, sub, inSub, dev, start, q)
}

// stepAlternatives tries the sub-requests of a firstAvailable request in
// order of preference.
func (r *run) stepAlternatives(c, g int, grp *group) (bool, error) {
	allExceeded := true
	for i := range grp.alts {
		before := r.explored
		r.curSub[c][g] = i
		ok, err := r.step(c, g, i, true, 0, 0)
		if errors.Is(err, errMaxSize) {
			continue
		}
		allExceeded = false
		if err != nil || ok {
			return ok, err
		}
		if r.explored > before {
			// A more preferred alternative worked with this prefix:
			// later alternatives can only be worse.
			return false, nil
		}
	}
	if allExceeded {
		return false, errMaxSize
	}
	return false, nil
}

// stepAll takes device number dev of an All request: the devices are
// fixed, so there is nothing to choose.
func (r *run) stepAll(c, g, sub int, inSub bool, dev int, q *req) (bool, error) {
	d := r.allDevs[q.idx][dev]
	ok, t, err := r.take(q, d, true)
	if err != nil && r.found {
		return false, nil
	}
	if err != nil || !ok {
		return false, err
	}
	done, err := r.step(c, g, sub, inSub, dev+1, 0)
	if err != nil || !done {
		r.undo(t)
		return false, err
	}
	return true, nil
}

// stepCandidates tries every device from start on as device number dev
// of an ExactCount request, in upstream's order.
func (r *run) stepCandidates(c, g, sub int, inSub bool, dev, start int, q *req) (bool, error) {
	var tried []int // devices taken at this position and given back
	for d := start; d < len(r.view.devices); d++ {
		if len(tried) > 0 && r.twinTried(tried, d) {
			continue
		}
		ok, err := r.candidate(c, q, d)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		ok, t, err := r.take(q, d, false)
		if err != nil {
			if !r.found {
				return false, err
			}
			continue
		}
		if !ok {
			continue
		}
		done, err := r.step(c, g, sub, inSub, dev+1, d+1)
		if err == nil && done {
			return true, nil
		}
		r.undo(t)
		if err != nil {
			return false, err
		}
		if r.skipTwins {
			tried = append(tried, d)
		}
	}
	return false, nil
}

// candidate reports whether device d may serve request q of claim c:
// free (or, for admin access, not already the claim's), selected, with
// capacity left. Errors count only until a first solution is found, as
// upstream stops at that solution and never sees them.
func (r *run) candidate(c int, q *req, d int) (bool, error) {
	if q.admin {
		if r.ownedBy(d, int32(c)) {
			return false, nil
		}
	} else if r.inUse(d) {
		return false, nil
	}
	ok, err := r.selectable(q, d)
	if err != nil {
		if !r.found {
			return false, err
		}
		return false, nil
	}
	if !ok || !r.f.ConsumableCapacity {
		return ok, nil
	}
	fits, err := r.capacityFits(q, d)
	if err != nil {
		if !r.found {
			return false, fmt.Errorf("claim %s, request %s: checking capacity of ResourceSlice %s, device %s: %w", klog.KObj(r.s.plans[c].claim), q.subOrBase(), r.view.devices[d].slice.Name, r.view.devices[d].api.Name, err)
		}
		return false, nil
	}
	return fits, nil
}

// leaf is reached with every claim allocated.
func (r *run) leaf() (bool, error) {
	if r.view.multiTerm {
		if err := r.selectorsBuild(); err != nil {
			if !r.found {
				return false, err
			}
			return false, nil
		}
	}
	first := !r.found
	r.found = true
	r.explored++
	var q Quality
	if r.pol.anyEnabled() {
		q = r.evaluate()
	}
	binding := r.bindingPicks()
	if r.best == nil || r.beats(q, binding) {
		r.best = r.snapshot(q, binding)
	}
	if first && !r.pol.anyEnabled() {
		return true, nil
	}
	return false, nil
}

func (r *run) inUse(d int) bool {
	return len(r.owners[d]) > 0 || r.ledgerExclusive(d)
}

// ledgerExclusive caches AllocatedDevices.Has per device for the run.
func (r *run) ledgerExclusive(d int) bool {
	switch r.exclusive[d] {
	case 1:
		return true
	case 2:
		return false
	}
	has := r.s.state.AllocatedDevices.Has(r.view.devices[d].id)
	r.exclusive[d] = 2
	if has {
		r.exclusive[d] = 1
	}
	return has
}

// ledgerHolds caches Session.holds per device for the run.
func (r *run) ledgerHolds(d int) bool {
	switch r.holding[d] {
	case 1:
		return true
	case 2:
		return false
	}
	h := r.s.holds(r.view.devices[d])
	r.holding[d] = 2
	if h {
		r.holding[d] = 1
	}
	return h
}

func (r *run) ownedBy(d int, claim int32) bool {
	for _, c := range r.owners[d] {
		if c == claim {
			return true
		}
	}
	return false
}

func (r *run) capacityFits(q *req, d int) (bool, error) {
	dv := r.view.devices[d]
	return r.capFitOf(q, d).fits(dv, r.s.state.AggregatedCapacity[dv.id], r.pendingOf(d))
}

// capFitOf caches newCapFit per request and device for this run.
func (r *run) capFitOf(q *req, d int) *capFit {
	if r.caps == nil {
		r.caps = make([][]*capFit, len(r.s.reqs))
	}
	c := r.caps[q.idx]
	if c == nil {
		c = make([]*capFit, len(r.view.devices))
		r.caps[q.idx] = c
	}
	if c[d] == nil {
		c[d] = r.capFitMemo(q, d)
	}
	return c[d]
}

// sharedInUse reports whether an allow-multiple device already holds a
// share, in the ledger or in this run; its counters are then paid for.
func (r *run) sharedInUse(d int) bool {
	dv := r.view.devices[d]
	if _, ok := r.s.state.AggregatedCapacity[dv.id]; ok {
		return true
	}
	return r.s.shared[dv.id] || r.sharesOf(d) > 0
}

// take tentatively allocates device d for q. On success the returned
// token undoes it (release). must is set for "All" requests, where a
// device that violates a constraint is an input error, as upstream
// reports it.
func (r *run) take(q *req, d int, must bool) (bool, taken, error) {
	dv := r.view.devices[d]
	t := taken{q: q, d: d, multi: r.f.ConsumableCapacity && dv.multi}
	if !t.multi && q.admin && r.ownedBy(d, int32(q.claim)) {
		return false, t, nil
	}
	if !q.admin && r.inUse(d) {
		return false, t, nil
	}
	if len(dv.api.ConsumesCounters) > 0 {
		if !r.f.PartitionableDevices {
			return false, t, nil
		}
		if !t.multi || !r.sharedInUse(d) {
			pi, li := r.view.locate(d)
			if !r.countersFit(pi, li) {
				return false, t, nil
			}
			r.addCounters(pi, li, 1)
			t.counted = true
		}
	}
	if r.f.DeviceTaints && taintBlocks(dv.api, q.tolerate) {
		r.undo(t)
		return false, t, nil
	}
	cons := r.cons[q.claim]
	for _, c := range cons {
		if !c.add(q, dv) {
			r.undo(t)
			if must {
				return false, t, fmt.Errorf("claim %s, request %s: cannot add device %s because a claim constraint would not be satisfied", klog.KObj(r.s.plans[q.claim].claim), q.subOrBase(), dv.id)
			}
			return false, t, nil
		}
		t.constraints++
	}
	if !t.multi {
		r.owners[d] = append(r.owners[d], int32(q.claim))
		t.owned = true
	}
	pk := pick{dev: d, q: q, counted: t.counted}
	if r.f.ConsumableCapacity {
		fits, err := r.capacityFits(q, d)
		if err != nil || !fits {
			r.undo(t)
			if err != nil {
				return false, t, fmt.Errorf("claim %s, request %s: rechecking capacity of ResourceSlice %s, device %s: %w", klog.KObj(r.s.plans[q.claim].claim), q.subOrBase(), dv.slice.Name, dv.api.Name, err)
			}
			return false, t, nil
		}
		if t.multi {
			pk.shared = true
			cf := r.capFitOf(q, d)
			pk.consumed = cf.consumed
			r.addPending(d, cf, 1)
			t.fit = cf
			t.pending = true
		}
	}
	r.picks[q.claim] = append(r.picks[q.claim], pk)
	t.picked = true
	return true, t, nil
}

// taken records what take changed, so that undo can reverse it.
type taken struct {
	q           *req
	d           int
	multi       bool
	counted     bool
	constraints int
	owned       bool
	pending     bool
	fit         *capFit
	picked      bool
}

// undo reverses take, in the opposite order.
func (r *run) undo(t taken) {
	c := t.q.claim
	if t.picked {
		r.picks[c] = r.picks[c][:len(r.picks[c])-1]
	}
	if t.pending {
		r.addPending(t.d, t.fit, -1)
	}
	if t.owned {
		r.owners[t.d] = withoutOwner(r.owners[t.d], int32(c))
	}
	cons := r.cons[c]
	for j := t.constraints - 1; j >= 0; j-- {
		cons[j].remove(t.q)
	}
	if t.counted {
		pi, li := r.view.locate(t.d)
		r.addCounters(pi, li, -1)
	}
}

// addPending adds (sign 1) or removes (sign -1) one share's consumption.
// Entries stay allocated when the last share goes, to be reused.
func (r *run) addPending(d int, f *capFit, sign int) {
	if r.pending == nil {
		r.pending = make([][]resource.Quantity, len(r.view.devices))
		r.pendingF = make([][]float64, len(r.view.devices))
		r.shares = make([]int32, len(r.view.devices))
	}
	r.shares[d] += int32(sign)
	if r.pending[d] == nil {
		r.pending[d] = make([]resource.Quantity, len(f.vec))
		r.pendingF[d] = make([]float64, len(f.vec))
	}
	p, pf := r.pending[d], r.pendingF[d]
	for i := range f.vec {
		if sign > 0 {
			p[i].Add(f.vec[i])
			pf[i] += f.vecF[i]
		} else {
			p[i].Sub(f.vec[i])
			pf[i] -= f.vecF[i]
		}
	}
}

// pendingOf is what this run's shares consume of device d, in capNames
// order, nil if none.
func (r *run) pendingOf(d int) []resource.Quantity {
	if r.shares == nil || r.shares[d] == 0 {
		return nil
	}
	return r.pending[d]
}

// sharesOf counts this run's shares of device d.
func (r *run) sharesOf(d int) int32 {
	if r.shares == nil {
		return 0
	}
	return r.shares[d]
}

func taintBlocks(d *resourceapi.Device, tolerations []resourceapi.DeviceToleration) bool {
	for _, t := range d.Taints {
		if !topology.KeepsClaimsOff(t) {
			continue
		}
		tolerated := false
		for _, tol := range tolerations {
			if resourceclaim.ToleratesTaint(tol, t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return true
		}
	}
	return false
}

// failure says why nothing fit, per request: how many devices the node
// has that match, and how many of those are free, so that a user can tell
// "no such device here" from "all in use" from "constraints". The parts
// leave out the claims' names (failureMessage adds them), so that a
// failure remembered for one pod reads right for the next (solutionmemo.go).
func (r *run) failure() []failurePart {
	var parts []failurePart
	for _, p := range r.view.pools {
		if p.incomplete {
			// Not named: the pool is the node's own, and the scheduler's
			// summary of the nodes' reasons must not grow with the fleet.
			parts = append(parts, failurePart{claim: -1, text: "a resource pool of the node is being updated"})
		}
	}
	joint := jointDemand{free: make([]bool, len(r.view.devices)), fits: true}
	eachFits := len(parts) == 0
	for ci := range r.s.plans {
		for _, g := range r.s.plans[ci].groups {
			groupFits := false
			for _, q := range g.alts {
				text, fits := r.requestFailure(q, &joint, len(g.alts) == 1)
				parts = append(parts, failurePart{claim: ci, text: text})
				groupFits = groupFits || fits
			}
			eachFits = eachFits && groupFits
		}
	}
	switch text := joint.failure(); {
	case text != "":
		parts = append(parts, failurePart{claim: -1, text: text})
	case eachFits:
		parts = append(parts, failurePart{claim: -1, text: r.togetherFailure(&joint)})
	}
	return parts
}

// togetherFailure is the clause for requests that each find enough free
// devices and still do not fit together, which their counts would not
// show: it names what ties them, the claims' constraints, the shared
// counters or capacity of the free devices they draw on, and the limit
// of devices in one claim.
func (r *run) togetherFailure(joint *jointDemand) string {
	var ties []string
	for _, p := range r.s.plans {
		for _, c := range p.constraints {
			switch {
			case c.MatchAttribute != nil:
				ties = appendNew(ties, "matchAttribute "+string(*c.MatchAttribute))
			case c.DistinctAttribute != nil:
				ties = appendNew(ties, "distinctAttribute "+string(*c.DistinctAttribute))
			}
		}
	}
	if joint.counters {
		ties = append(ties, "the shared counters they consume")
	}
	if joint.multi {
		ties = append(ties, "the capacity they share")
	}
	if r.tooMany {
		ties = append(ties, fmt.Sprintf("the limit of %d devices a claim may hold", resourceapi.AllocationResultsMaxSize))
	}
	if len(ties) == 0 {
		return "enough free devices match each request, but no combination of them fits"
	}
	return "enough free devices match each request, but no combination of them satisfies " + strings.Join(ties, " and ")
}

// appendNew appends s unless list holds it.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// jointDemand adds up what the requests need of devices each takes
// whole: each request may find enough free devices alone and all of them
// together not, which the per-request parts would not show (two
// containers of four GPUs each where six are free).
type jointDemand struct {
	requests, need int
	free           []bool // by device: free, and some request may take it
	freeCount      int
	fits           bool // every request alone finds enough
	shared         bool // a request or device outside the sum
	// counters, multi: some free device that a request (an alternative
	// too) may take consumes shared counters, or may be shared.
	counters, multi bool
}

// failure is the clause for the requests together, or "" when they are
// not the reason (a request short alone, or devices shared).
func (j *jointDemand) failure() string {
	if j.requests < 2 || !j.fits || j.shared || j.need <= j.freeCount {
		return ""
	}
	return fmt.Sprintf("the %d requests need %d devices together, %d free match any of them", j.requests, j.need, j.freeCount)
}

// requestFailure is q's part of failure, and whether q alone finds
// enough free devices; plain (not one of several alternatives) adds q to
// joint.
func (r *run) requestFailure(q *req, joint *jointDemand, plain bool) (string, bool) {
	match, free := 0, 0
	busy := map[string]int{}
	for d := range r.view.devices {
		ok, err := r.selectable(q, d)
		if err != nil || !ok {
			continue
		}
		match++
		if why := r.busyFor(q, d); why != "" {
			busy[why]++
			continue
		}
		free++
		dev := r.view.devices[d]
		joint.counters = joint.counters || len(dev.api.ConsumesCounters) > 0
		joint.multi = joint.multi || dev.multi
		if plain && !joint.free[d] {
			joint.free[d] = true
			joint.freeCount++
			joint.shared = joint.shared || r.view.devices[d].multi
		}
	}
	if plain {
		joint.requests++
		joint.need += r.num[q.idx]
		joint.fits = joint.fits && free >= r.num[q.idx]
		joint.shared = joint.shared || q.all || q.admin
	}
	fits := free >= r.num[q.idx]
	need := fmt.Sprint(r.num[q.idx])
	if q.all {
		need, fits = "all", free == match
	}
	msg := fmt.Sprintf("request %s: needs %s, %d match, %d free", q.name, need, match, free)
	if len(busy) > 0 {
		var causes []string
		for _, why := range busyCauses {
			if n := busy[why]; n > 0 {
				causes = append(causes, fmt.Sprintf("%d %s", n, why))
			}
		}
		msg += " (" + strings.Join(causes, ", ") + ")"
	}
	return msg, fits
}

// failurePart is one part of a failure: about the session's claim number
// claim (-1: about the node).
type failurePart struct {
	claim int
	text  string
}

// failureMessage writes the parts with the session's claims named.
func (s *Session) failureMessage(parts []failurePart) string {
	if len(parts) == 0 {
		return "cannot allocate all claims"
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.text
		if p.claim >= 0 {
			texts[i] = fmt.Sprintf("claim %s, %s", klog.KObj(s.plans[p.claim].claim), p.text)
		}
	}
	return "cannot allocate all claims (" + strings.Join(texts, "; ") + ")"
}

// Why a matching device is not free, as failure messages count them
// (busyCauses, in the order they are listed).
const (
	busyInUse              = "in use"
	busyCounters           = "shared counters exhausted"
	busyCapacity           = "capacity exhausted"
	busyCapacityTooSmall   = "capacity below the request"
	busyCapacityNotOffered = "capacity not offered as requested"
	busyTainted            = "tainted"
)

var busyCauses = []string{busyInUse, busyCounters, busyCapacity, busyCapacityTooSmall, busyCapacityNotOffered, busyTainted}

// busyFor says why q alone could not take device d now, or "" if it
// could: in use, counters or capacity exhausted, capacity below the
// request or not offered as requested, tainted.
func (r *run) busyFor(q *req, d int) string {
	dv := r.view.devices[d]
	if !q.admin && r.ledgerExclusive(d) {
		return busyInUse
	}
	if len(dv.api.ConsumesCounters) > 0 {
		pi, li := r.view.locate(d)
		if !r.f.PartitionableDevices || !r.fitsCounters(pi, r.view.pools[pi].usesOf(li), false) {
			return busyCounters
		}
	}
	if r.f.ConsumableCapacity {
		fit := r.capFitOf(q, d)
		if ok, err := fit.fits(dv, r.s.state.AggregatedCapacity[dv.id], nil); err != nil || !ok {
			// A request the device could not take even unused is not
			// waiting for anything to be freed.
			switch {
			case !fit.possible:
				return busyCapacityNotOffered
			case !fit.alone:
				return busyCapacityTooSmall
			}
			return busyCapacity
		}
	}
	if r.f.DeviceTaints && taintBlocks(dv.api, q.tolerate) {
		return busyTainted
	}
	return ""
}
