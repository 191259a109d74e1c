package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/topology"
)

// DeviceClassLister is the upstream lister interface.
type DeviceClassLister = structured.DeviceClassLister

// AllocatedState is the upstream view of what is allocated or in flight:
// the scheduler's shared DRA manager (its claim tracker) produces it, the
// one ledger that every profile of a scheduler process shares.
type AllocatedState = structured.AllocatedState

// Engine holds what is shared by all allocations: features, policy and the
// CEL compilation cache. It is safe for concurrent use.
type Engine struct {
	features Features
	policy   Policy
	celCache *cel.Cache
	// noTwins makes the search visit twins (twins.go); tests compare.
	noTwins bool
	// id keys the engine's solutions in the inventory's memo; noMemo turns
	// the memo off (solutionmemo.go); tests compare.
	id     uint64
	noMemo bool
	// memoHits counts Allocate calls answered from a memo.
	memoHits atomic.Int64
}

// Options configure an Engine.
type Options struct {
	// Features; use DefaultFeatures() unless a feature gate is off.
	Features Features
	Policy   Policy
	// CELCache is shared with the scheduler's in-tree plugin where both
	// run; nil creates one with room for 1024 expressions.
	CELCache *cel.Cache
}

// New returns an Engine or an error naming the invalid option.
func New(opts Options) (*Engine, error) {
	if extra := Unsupported(opts.Features); len(extra) > 0 {
		return nil, fmt.Errorf("features: %v are not supported by the gputopo engine", extra)
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, err
	}
	c := opts.CELCache
	if c == nil {
		c = cel.NewCache(1024, cel.Features{EnableConsumableCapacity: opts.Features.ConsumableCapacity})
	}
	return &Engine{features: opts.Features, policy: opts.Policy, celCache: c, id: engineIDs.Add(1)}, nil
}

func sortedList(s interface{ UnsortedList() []string }) []string {
	l := s.UnsortedList()
	slices.Sort(l)
	return l
}

// Session is one pod's allocation problem: its claims against one snapshot
// of slices, classes and allocated state. Build it once per scheduling
// cycle (PreFilter) and call Allocate for every candidate node (Filter),
// possibly concurrently.
type Session struct {
	eng     *Engine
	inv     *Inventory
	classes DeviceClassLister
	state   *AllocatedState
	claims  []*resourceapi.ResourceClaim
	plans   []claimPlan
	reqs    []*req
	// admin: some request asks for admin access (adminaccess.go).
	admin  bool
	err    error
	legacy bool // see legacyFeatures
	// workload replaces the policy's for Packing when set.
	workload topology.Workload
	// compiled is the workload Packing measures against (workload, or
	// the policy's), grouped for Fragmentation once per session.
	compileOnce sync.Once
	compiled    *topology.CompiledWorkload
	// bucket is memoBucket's, found once.
	keyOnce sync.Once
	bucket  *memoBucket
	// failures are the errors of remembered failures, by their parts
	// (rememberedFailure).
	failures sync.Map
	// selectorsKey is selectors', found once (selection.go).
	selectorsOnce sync.Once
	selectorsKey  string

	// shared marks devices that hold at least one shared (consumable
	// capacity) allocation in the ledger.
	shared map[structured.DeviceID]bool

	mu       sync.Mutex
	counters map[*pool]*poolCounters
	// bare is the result on a node without pools, when the session has
	// no claims (bareNode); read on every such node, without a lock.
	bare atomic.Pointer[Result]
}

// WithWorkload makes Packing measure fragmentation against w (a valid,
// non-empty workload, such as a topology.Learner's) instead of the
// policy's; call it before Allocate.
func (s *Session) WithWorkload(w topology.Workload) *Session {
	if len(w) > 0 {
		s.workload = w
	}
	return s
}

// compiledWorkload is the workload Packing measures against, compiled
// on first use.
func (s *Session) compiledWorkload() *topology.CompiledWorkload {
	s.compileOnce.Do(func() {
		w := s.eng.policy.Workload
		if s.workload != nil {
			w = s.workload
		}
		s.compiled = w.Compile()
	})
	return s.compiled
}

// NewSession prepares the allocation of claims, which must all still need
// an allocation. Input errors (missing class, unsupported request) are
// returned by every Allocate call, wrapped in ErrInvalidInput.
func (e *Engine) NewSession(inv *Inventory, classes DeviceClassLister, state *AllocatedState, claims []*resourceapi.ResourceClaim) *Session {
	if state == nil {
		state = &AllocatedState{}
	}
	s := &Session{
		eng: e, inv: inv, classes: classes, state: state, claims: claims,
		counters: make(map[*pool]*poolCounters),
		legacy:   isLegacy(e.features),
	}
	if len(state.AllocatedSharedDeviceIDs) > 0 && !s.legacy {
		s.shared = make(map[structured.DeviceID]bool, len(state.AllocatedSharedDeviceIDs))
		for id := range state.AllocatedSharedDeviceIDs {
			s.shared[id.GetDeviceID()] = true
		}
	}
	if err := s.plan(); err != nil {
		s.err = fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return s
}

// Result is the allocation chosen on one node.
type Result struct {
	// Allocations has one entry per claim, in the order given.
	Allocations []resourceapi.AllocationResult
	// Quality explains the choice.
	Quality Quality
}

// HostUse is the node's CPU and memory besides its devices: what is left
// before the pod and what the pod asks for. With it, Packing counts the
// free share of a GPU as fragmented for every workload class whose CPU or
// memory the node no longer has (as FGD does), so that GPU pods do not
// pile onto a node until its CPU is gone and its GPUs are stranded.
type HostUse struct {
	Free, Pod topology.Host
	// Excluded is the share of future requests that may not run on this
	// node (topology.Fragmentation), 0 when all may.
	Excluded float64
	// Contention is the probability that a GPU the pod takes here is one
	// that requests which may run on few nodes will miss; Packing adds it,
	// times the GPUs taken, to the growth of fragmentation.
	Contention float64
}

// podRequest is the pod's CPU and memory as a request class counts them:
// none when the node's are not judged (nil).
func (h *HostUse) podRequest() (cpuMilli, memoryMiB int64) {
	if h == nil {
		return 0, 0
	}
	return h.Pod.CPUMilli, h.Pod.MemoryMiB
}

// after is what the node has left once the pod runs there.
func (h *HostUse) after() topology.Host {
	return topology.Host{CPUMilli: h.Free.CPUMilli - h.Pod.CPUMilli, MemoryMiB: h.Free.MemoryMiB - h.Pod.MemoryMiB}
}

// Allocate finds the best allocation of the session's claims on node,
// given the node's CPU and memory (nil: not counted). Whether the claims
// fit does not depend on host; Quality's fragmentation does, and with it
// which of the node's allocations Packing prefers and how the node
// compares to others. It returns an error wrapping
// ErrUnsatisfiable when there is none, one wrapping ErrInvalidPool when
// there is none and some visible pool is malformed, and one wrapping
// ErrInvalidInput for input errors.
func (s *Session) Allocate(ctx context.Context, node *v1.Node, host *HostUse) (*Result, error) {
	if s.err != nil {
		return nil, s.err
	}
	logger := klog.FromContext(ctx)
	view, err := s.inv.view(node)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if len(s.claims) == 0 && len(view.pools) == 0 {
		return s.bareNode(ctx, node, view, host)
	}
	// A done context gets the search's error, not a remembered answer.
	bucket, sel := s.memoBucket(), newSelection(ctx, s, node, view)
	var key, flags []byte
	if bucket != nil && ctx.Err() == nil {
		key, flags = s.nodeKey(view, host, sel)
		if ctx.Err() != nil {
			key = nil // a selector cut short wrote an error into it
		} else if e, ok := bucket.get(key); ok {
			s.eng.memoHits.Add(1)
			if e.sol == nil {
				return nil, s.rememberedFailure(view, e.failed)
			}
			r := &run{s: s, ctx: ctx, node: node, view: view, f: s.eng.features, pol: s.eng.policy, host: host}
			return r.result(s.adopt(e.sol), e.explored)
		}
	}
	r, err := s.newRun(ctx, node, view, sel)
	if err != nil {
		return nil, err
	}
	r.host = host
	if key != nil {
		r.seedLedger(flags)
	}
	res, err := r.solve()
	if err != nil {
		if key != nil && !r.cut && r.failed != nil && errors.Is(err, ErrUnsatisfiable) && !view.namesPools() {
			bucket.put(key, memoEntry{failed: r.failed})
		}
		return nil, err
	}
	if key != nil && !r.cut {
		bucket.put(key, memoEntry{sol: r.best, explored: r.explored})
	}
	logger.V(5).Info("Allocation found", "node", klog.KObj(node), "claims", len(s.claims), "quality", res.Quality)
	return res, nil
}

// unsatisfiable builds the error for "no allocation on this node", an
// *InvalidPoolError when a pool is invalid, as upstream's.
func unsatisfiable(view *nodeView, reason string) error {
	for _, p := range view.pools {
		if p.invalid {
			return &InvalidPoolError{Pool: p.String(), Kind: p.invalidKind, Detail: p.invalidReason}
		}
	}
	return fmt.Errorf("%w: %s", ErrUnsatisfiable, reason)
}

// namesPools reports whether a failure on the view would be about one of
// its pools (being updated, or invalid). Such failures are not kept,
// though keeping them would be right (the shape holds a pool's
// incompleteness, and a view with an invalid pool has a number of its
// own): a pool is being updated for the seconds its driver takes to
// publish it whole, and an invalid one is a driver's fault to mend, so
// the memo would gain little.
func (v *nodeView) namesPools() bool {
	for _, p := range v.pools {
		if p.incomplete || p.invalid {
			return true
		}
	}
	return false
}

// IsNodeLevel reports whether err only concerns the node it came from.
func IsNodeLevel(err error) bool {
	return errors.Is(err, ErrUnsatisfiable) || errors.Is(err, ErrInvalidPool)
}
