package allocator

import (
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Ledger is the single record of what is allocated: claims whose status
// holds an allocation, and allocations in flight (chosen in Reserve, not
// yet written by PreBind). Devices held with admin access are not counted,
// as upstream does not count them. It is safe for concurrent use.
type Ledger struct {
	consumableCapacity bool

	mu       sync.Mutex
	claims   map[types.UID]ledgerEntry
	inFlight map[types.UID]ledgerEntry
	cached   *AllocatedState
}

type ledgerEntry struct {
	name    string
	results []resourceapi.DeviceRequestAllocationResult
}

// NewLedger returns an empty ledger. With ConsumableCapacity off, shares
// count as exclusive allocations, as upstream treats them.
func NewLedger(features Features) *Ledger {
	return &Ledger{
		consumableCapacity: features.ConsumableCapacity,
		claims:             make(map[types.UID]ledgerEntry),
		inFlight:           make(map[types.UID]ledgerEntry),
	}
}

// SetClaim records the claim's allocation, or forgets it when the claim has
// none. An allocation written to the claim replaces its in-flight entry.
func (l *Ledger) SetClaim(claim *resourceapi.ResourceClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cached = nil
	if claim.Status.Allocation == nil {
		delete(l.claims, claim.UID)
		return
	}
	l.claims[claim.UID] = ledgerEntry{name: claim.Namespace + "/" + claim.Name, results: claim.Status.Allocation.Devices.Results}
	delete(l.inFlight, claim.UID)
}

// DeleteClaim forgets a deleted claim, allocated or in flight.
func (l *Ledger) DeleteClaim(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cached = nil
	delete(l.claims, uid)
	delete(l.inFlight, uid)
}

// Reserve records an allocation in flight. It refuses, with ErrConflict
// naming both claims, a device that another claim holds exclusively or
// that would be held exclusively while shared: the engine never proposes
// that, so a conflict means two schedulers or two cycles raced.
func (l *Ledger) Reserve(claim *resourceapi.ResourceClaim, result *resourceapi.AllocationResult) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	owner := make(map[structured.DeviceID]string)
	sharedBy := make(map[structured.DeviceID]string)
	note := func(uid types.UID, e ledgerEntry) {
		if uid == claim.UID {
			return
		}
		for _, r := range e.results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID != nil && l.consumableCapacity {
				sharedBy[id] = e.name
			} else {
				owner[id] = e.name
			}
		}
	}
	for uid, e := range l.claims {
		note(uid, e)
	}
	for uid, e := range l.inFlight {
		note(uid, e)
	}
	name := claim.Namespace + "/" + claim.Name
	for _, r := range result.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if other, ok := owner[id]; ok {
			return fmt.Errorf("%w: claim %s, request %s: device %s is allocated to claim %s", ErrConflict, name, r.Request, id, other)
		}
		if other, ok := sharedBy[id]; ok && (r.ShareID == nil || !l.consumableCapacity) {
			return fmt.Errorf("%w: claim %s, request %s: device %s is shared by claim %s and cannot be allocated exclusively", ErrConflict, name, r.Request, id, other)
		}
	}
	l.cached = nil
	l.inFlight[claim.UID] = ledgerEntry{name: name, results: result.Devices.Results}
	return nil
}

// Release drops an in-flight allocation (Unreserve, or after PreBind wrote
// it and SetClaim saw it).
func (l *Ledger) Release(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.inFlight[uid]; ok {
		l.cached = nil
		delete(l.inFlight, uid)
	}
}

// InFlight reports whether a claim has an in-flight allocation.
func (l *Ledger) InFlight(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.inFlight[uid]
	return ok
}

// State returns what is allocated or in flight, in upstream's form. The
// result is shared until the next change: callers must not modify it.
func (l *Ledger) State() *AllocatedState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cached != nil {
		return l.cached
	}
	s := &AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	add := func(e ledgerEntry) {
		for _, r := range e.results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID != nil && l.consumableCapacity {
				s.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			s.AllocatedDevices.Insert(id)
		}
	}
	for _, e := range l.claims {
		add(e)
	}
	for _, e := range l.inFlight {
		add(e)
	}
	l.cached = s
	return s
}
