package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/dynamic-resource-allocation/structured/schedulerapi"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"
)

// ledger is the claim tracker the replay hands gputopo's plugins:
// kube-scheduler's own, except that GatherAllocatedState keeps its
// answer up to date instead of copying it whole. Upstream's copies the
// consumed capacity of every allocated shared device on every read, once
// per pod, so a replay's cost grew with the square of the fleet: on the
// openb fleet every GPU is a shared device, and the copy was a third of
// a replay. The ledger counts what upstream's counts, with upstream's
// rules: the allocated claims of the scheduler's assume cache (it hears
// of each change on the claim informer, or from the plugins' assume and
// restore calls, and reads the claim back from the cache) and the
// allocations in flight. Every checkEvery-th read is compared with
// upstream's answer, and a difference stops the replay.
//
// The in-flight allocations it counts are those signalled through it;
// upstream's tracker answers for each whether it is still in flight. In
// a replay every pod goes to a profile whose DRA plugins are gputopo's
// (the in-tree DynamicResources plugin signals upstream's tracker
// directly), which the comparison checks.
type ledger struct {
	fwk.ResourceClaimTracker
	withShares bool
	checkEvery int

	mu       sync.Mutex
	counted  map[string]*resourceapi.ResourceClaim // allocated claims of the assume cache, as counted, by namespace/name
	pending  map[string]change                     // claims to recount, by namespace/name
	state    allocation
	inFlight sets.Set[types.UID]
	reads    int
	err      error // the first difference from upstream's answer
}

// newLedger wraps upstream's tracker. withShares is the
// DRAConsumableCapacity gate, which decides how upstream counts shares.
func newLedger(upstream fwk.ResourceClaimTracker, withShares bool, checkEvery int) *ledger {
	return &ledger{
		ResourceClaimTracker: upstream,
		withShares:           withShares,
		checkEvery:           checkEvery,
		counted:              map[string]*resourceapi.ResourceClaim{},
		pending:              map[string]change{},
		state:                newAllocation(),
		inFlight:             sets.New[types.UID](),
	}
}

// SignalClaimPendingAllocation is upstream's, remembering the claim so
// that later reads ask upstream whether it is still in flight.
func (l *ledger) SignalClaimPendingAllocation(uid types.UID, claim *resourceapi.ResourceClaim) error {
	if err := l.ResourceClaimTracker.SignalClaimPendingAllocation(uid, claim); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight.Insert(uid)
	return nil
}

// GatherAllocatedState is upstream's answer: the allocated claims plus
// the in-flight allocations. The caller must not modify it (gputopo's
// plugins only read it): its consumed capacities are shared with the
// ledger, which replaces a device's rather than changing it.
func (l *ledger) GatherAllocatedState() (*structured.AllocatedState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.catchUp(); err != nil {
		return nil, err
	}
	out := l.state.clone()
	for uid := range l.inFlight {
		allocation := l.GetPendingAllocation(uid)
		if allocation == nil {
			l.inFlight.Delete(uid)
			continue
		}
		out.add(allocation, l.withShares)
	}
	state := out.allocatedState()
	l.reads++
	if l.checkEvery > 0 && l.reads%l.checkEvery == 0 && l.err == nil {
		if err := l.compare(state); err != nil {
			l.err = fmt.Errorf("replay ledger, read %d: %w", l.reads, err)
		}
	}
	return state, nil
}

// counts reports whether the ledger counts the device as allocated, once
// it has caught up with what it heard.
func (l *ledger) counts(id structured.DeviceID) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.catchUp(); err != nil {
		return false, err
	}
	return l.state.devices.Has(id), nil
}

// Err is the first difference found between the ledger's answer and
// upstream's.
func (l *ledger) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// catchUp recounts the claims the cache may hold anew: those the claim
// informer reported since, and those the plugins assumed or restored. A
// claim stays to be recounted until the cache holds the version the
// informer reported (the cache hears of it on its own handler, which may
// run later) or, for a deletion, no longer holds the claim.
func (l *ledger) catchUp() error {
	for key, ev := range l.pending {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return fmt.Errorf("claim %q: %w", key, err)
		}
		cur, err := l.Get(ns, name)
		if err != nil && !errors.Is(err, assumecache.ErrNotFound) {
			return fmt.Errorf("claim %s: %w", key, err)
		}
		l.recount(key, cur)
		if ev.caughtUp(cur) {
			delete(l.pending, key)
		}
	}
	return nil
}

// recount counts cur (nil: gone) for key instead of what was counted.
func (l *ledger) recount(key string, cur *resourceapi.ResourceClaim) {
	old := l.counted[key]
	if old == cur {
		return
	}
	if old != nil {
		l.state.remove(old.Status.Allocation, l.withShares)
		delete(l.counted, key)
	}
	if cur != nil && cur.Status.Allocation != nil {
		l.state.add(cur.Status.Allocation, l.withShares)
		l.counted[key] = cur
	}
}

// change is what the ledger last heard of a claim: the version the
// informer reported, or its deletion; an empty version (assumed or
// restored by a plugin, in the cache already) is caught up at once.
type change struct {
	version string
	deleted bool
}

func (c change) caughtUp(cur *resourceapi.ResourceClaim) bool {
	switch {
	case c.deleted:
		return cur == nil
	case c.version == "":
		return true
	case cur == nil:
		return false
	}
	if cur.ResourceVersion == c.version {
		return true
	}
	have, err1 := strconv.ParseUint(cur.ResourceVersion, 10, 64)
	want, err2 := strconv.ParseUint(c.version, 10, 64)
	return err1 == nil && err2 == nil && have > want
}

// heard records a change of the claim for the next read.
func (l *ledger) heard(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[c.Namespace+"/"+c.Name] = change{version: c.ResourceVersion, deleted: deleted}
}

// handlers are the claim informer's handlers that feed heard.
func (l *ledger) handlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.heard(obj, false) },
		UpdateFunc: func(_, obj any) { l.heard(obj, false) },
		DeleteFunc: func(obj any) { l.heard(obj, true) },
	}
}

// AssumeClaimAfterAPICall is upstream's; the cache now holds the claim.
func (l *ledger) AssumeClaimAfterAPICall(claim *resourceapi.ResourceClaim) error {
	err := l.ResourceClaimTracker.AssumeClaimAfterAPICall(claim)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[claim.Namespace+"/"+claim.Name] = change{}
	return err
}

// AssumedClaimRestore is upstream's; the cache holds the informer's
// version again.
func (l *ledger) AssumedClaimRestore(namespace, name string) {
	l.ResourceClaimTracker.AssumedClaimRestore(namespace, name)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[namespace+"/"+name] = change{}
}

// compare checks state against upstream's answer, which it reads until
// upstream reports no concurrent change.
func (l *ledger) compare(state *structured.AllocatedState) error {
	var want *structured.AllocatedState
	var err error
	for range 100 {
		if want, err = l.ResourceClaimTracker.GatherAllocatedState(); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("upstream's allocated state: %w", err)
	}
	return sameAllocatedState(state, want)
}

// sameAllocatedState reports the first difference between got and want:
// the same devices, shares and consumed capacities (by value: the
// ledger's sums may be written differently).
func sameAllocatedState(got, want *structured.AllocatedState) error {
	if !got.AllocatedDevices.Equal(want.AllocatedDevices) {
		extra, missing := got.AllocatedDevices.Difference(want.AllocatedDevices), want.AllocatedDevices.Difference(got.AllocatedDevices)
		return fmt.Errorf("allocated devices differ from upstream's: %d extra %v, %d missing %v", extra.Len(), extra.UnsortedList(), missing.Len(), missing.UnsortedList())
	}
	if !got.AllocatedSharedDeviceIDs.Equal(want.AllocatedSharedDeviceIDs) {
		return fmt.Errorf("shares differ from upstream's: %d extra, %d missing",
			got.AllocatedSharedDeviceIDs.Difference(want.AllocatedSharedDeviceIDs).Len(), want.AllocatedSharedDeviceIDs.Difference(got.AllocatedSharedDeviceIDs).Len())
	}
	if len(got.AggregatedCapacity) != len(want.AggregatedCapacity) {
		return fmt.Errorf("consumed capacity on %d devices, upstream's on %d", len(got.AggregatedCapacity), len(want.AggregatedCapacity))
	}
	for id, w := range want.AggregatedCapacity {
		g, ok := got.AggregatedCapacity[id]
		if !ok || len(g) != len(w) {
			return fmt.Errorf("device %s: consumed capacity %v, upstream's %v", id, g, w)
		}
		for name, q := range w {
			if g[name] == nil || g[name].Cmp(*q) != 0 {
				return fmt.Errorf("device %s: consumed %s %v, upstream's %v", id, name, g[name], q)
			}
		}
	}
	return nil
}

// allocation is what GatherAllocatedState returns, kept up to date. A
// device's consumed capacity is never changed once stored, only
// replaced, so that a clone can share it; equal ones are one map
// (consumedValues).
type allocation struct {
	devices  sets.Set[structured.DeviceID]
	shares   sets.Set[structured.SharedDeviceID]
	consumed structured.ConsumedCapacityCollection
	values   consumedValues
}

func newAllocation() allocation {
	return allocation{devices: sets.New[structured.DeviceID](), shares: sets.New[structured.SharedDeviceID](), consumed: structured.NewConsumedCapacityCollection(), values: consumedValues{}}
}

func (a allocation) clone() allocation {
	return allocation{devices: maps.Clone(a.devices), shares: maps.Clone(a.shares), consumed: maps.Clone(a.consumed), values: a.values}
}

func (a allocation) allocatedState() *structured.AllocatedState {
	return &structured.AllocatedState{AllocatedDevices: a.devices, AllocatedSharedDeviceIDs: a.shares, AggregatedCapacity: a.consumed}
}

func (a allocation) add(r *resourceapi.AllocationResult, withShares bool) {
	forEachDevice(r, withShares, a.devices.Insert, a.shares.Insert, func(c structured.DeviceConsumedCapacity) {
		next := schedulerapi.NewConsumedCapacity()
		if cur, ok := a.consumed[c.DeviceID]; ok {
			next = cur.Clone()
		}
		next.Add(c.ConsumedCapacity)
		a.consumed[c.DeviceID] = a.values.one(next)
	})
}

func (a allocation) remove(r *resourceapi.AllocationResult, withShares bool) {
	forEachDevice(r, withShares, a.devices.Delete, a.shares.Delete, func(c structured.DeviceConsumedCapacity) {
		cur, ok := a.consumed[c.DeviceID]
		if !ok {
			return
		}
		next := cur.Clone()
		next.Sub(c.ConsumedCapacity)
		if next.Empty() {
			delete(a.consumed, c.DeviceID)
			return
		}
		a.consumed[c.DeviceID] = a.values.one(next)
	})
}

// forEachDevice hands each device of an allocation to the callback for
// its kind, by the rules of kube-scheduler's claim tracker: admin access
// takes nothing; with shares counted (DRAConsumableCapacity), a result
// with a share ID is a share and its consumed capacity, any other a
// dedicated device; without, every result is a dedicated device.
func forEachDevice(r *resourceapi.AllocationResult, withShares bool,
	dedicated func(...structured.DeviceID) sets.Set[structured.DeviceID],
	share func(...structured.SharedDeviceID) sets.Set[structured.SharedDeviceID],
	consumed func(structured.DeviceConsumedCapacity)) {
	if r == nil {
		return
	}
	for _, res := range r.Devices.Results {
		if ptr.Deref(res.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(res.Driver, res.Pool, res.Device)
		if withShares && res.ShareID != nil {
			share(structured.MakeSharedDeviceID(id, res.ShareID))
			if res.ConsumedCapacity != nil {
				consumed(structured.NewDeviceConsumedCapacity(id, res.ConsumedCapacity))
			}
			continue
		}
		dedicated(id)
	}
}

// ledgerCheckEvery is how often a replay compares the ledger's answer
// with upstream's: rarely enough to cost nothing, often enough that a
// replay in which they part stops within a few hundred pods.
var ledgerCheckEvery = 256

// ledgers hands one ledger per DRA manager (one per scheduler) to the
// plugins of a registry.
type ledgers struct {
	checkEvery int
	claims     cache.SharedIndexInformer // the scheduler's claim informer

	mu  sync.Mutex
	by  map[fwk.SharedDRAManager]*ledger
	all []*ledger
}

// wrap returns the registry with each factory given a handle whose DRA
// manager's claim tracker is a ledger.
func (ls *ledgers) wrap(r frameworkruntime.Registry) frameworkruntime.Registry {
	out := make(frameworkruntime.Registry, len(r))
	for name, factory := range r {
		out[name] = func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
			h, ok := fh.(frameworkHandle)
			if !ok {
				return nil, fmt.Errorf("plugin %s: the replay needs kube-scheduler's framework, got %T", name, fh)
			}
			if fh.SharedDRAManager() == nil {
				return factory(ctx, args, fh)
			}
			l, err := ls.of(fh.SharedDRAManager())
			if err != nil {
				return nil, fmt.Errorf("plugin %s: %w", name, err)
			}
			return factory(ctx, args, ledgerHandle{frameworkHandle: h, dra: ledgerManager{SharedDRAManager: fh.SharedDRAManager(), claims: l}})
		}
	}
	return out
}

func (ls *ledgers) of(m fwk.SharedDRAManager) (*ledger, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.by[m]; ok {
		return l, nil
	}
	if ls.by == nil {
		ls.by = map[fwk.SharedDRAManager]*ledger{}
	}
	l := newLedger(m.ResourceClaims(), utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity), ls.checkEvery)
	if _, err := ls.claims.AddEventHandler(l.handlers()); err != nil {
		return nil, fmt.Errorf("replay ledger: claim informer: %w", err)
	}
	ls.by[m] = l
	ls.all = append(ls.all, l)
	return l, nil
}

// counting waits until every ledger counts the device as allocated.
func (ls *ledgers) counting(ctx context.Context, id structured.DeviceID) error {
	ls.mu.Lock()
	all := slices.Clone(ls.all)
	ls.mu.Unlock()
	for _, l := range all {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Microsecond, decisionTimeout, true, func(context.Context) (bool, error) {
			return l.counts(id)
		})
		if err != nil {
			return fmt.Errorf("replay ledger did not count %s: %w", id, err)
		}
	}
	return nil
}

// err is the first difference any ledger found.
func (ls *ledgers) err() error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.all {
		if err := l.Err(); err != nil {
			return err
		}
	}
	return nil
}

// frameworkHandle is kube-scheduler's framework as its plugins see it,
// with the plugin list gputopo's profile check reads.
type frameworkHandle interface {
	fwk.Handle
	ListPlugins() *schedconfig.Plugins
}

type ledgerHandle struct {
	frameworkHandle
	dra fwk.SharedDRAManager
}

func (h ledgerHandle) SharedDRAManager() fwk.SharedDRAManager { return h.dra }

type ledgerManager struct {
	fwk.SharedDRAManager
	claims *ledger
}

func (m ledgerManager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }
