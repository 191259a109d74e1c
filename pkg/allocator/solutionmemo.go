package allocator

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gputopo/gputopo/pkg/topology"
)

// solutionMemo remembers a node view's last solutions. Pods come from few
// templates and most nodes do not change between two scheduling cycles,
// so most Filter calls would repeat a search already done: on 5,000 nodes
// the search was half of gputopo's scheduler CPU. A solution is reused
// only when everything the search reads is the same: the session's
// claims, classes, engine and workload (Session.memoKey), the node's CPU
// and memory, and the ledger's entries for every device of the view's
// pools (stateKey). Only solutions are kept: errors name claims. The
// workload is in the key, so a learned workload's rebuild (every 2% more
// pods seen) starts over: on a young scheduler of 2,000 pods a quarter of
// the searches are answered here, on one that has seen many more, most.
type solutionMemo struct {
	mu      sync.Mutex
	entries [maxSolutionMemo]memoEntry
	next    int
}

// maxSolutionMemo bounds a view's memo: enough for the few claim shapes
// a fleet schedules at a time, small next to the view itself.
const maxSolutionMemo = 8

type memoEntry struct {
	session  string
	host     HostUse
	hasHost  bool
	state    []byte
	sol      *solution
	explored int
}

func (e *memoEntry) matches(session string, host *HostUse, state []byte) bool {
	if e.sol == nil || e.session != session || e.hasHost != (host != nil) {
		return false
	}
	if host != nil && e.host != *host {
		return false
	}
	return bytes.Equal(e.state, state)
}

func (m *solutionMemo) get(session string, host *HostUse, state []byte) (*solution, int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.entries {
		if e := &m.entries[i]; e.matches(session, host, state) {
			return e.sol, e.explored, true
		}
	}
	return nil, 0, false
}

func (m *solutionMemo) put(session string, host *HostUse, state []byte, sol *solution, explored int) {
	e := memoEntry{session: session, hasHost: host != nil, state: state, sol: sol, explored: explored}
	if host != nil {
		e.host = *host
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[m.next] = e
	m.next = (m.next + 1) % maxSolutionMemo
}

// engineIDs tells engines apart in memo keys: views, and so memos, are
// shared by every engine that uses the inventory.
var engineIDs atomic.Uint64

// memoInput is what memoKey encodes.
type memoInput struct {
	Engine          uint64
	Legacy, NoTwins bool
	Workload        topology.Workload
	Claims          []memoClaim
	// Classes by content: the lister's have a resource version, but
	// classes built in memory need not.
	Classes []memoClass
}

type memoClaim struct {
	Namespace string
	Spec      *resourceapi.ResourceClaimSpec
}

type memoClass struct {
	Name string
	Spec *resourceapi.DeviceClassSpec
}

// memoKey is everything of the session the search reads besides the
// node: engine, claim specs, classes and workload; "" when the session
// cannot be keyed (the memo is then not used).
func (s *Session) memoKey() string {
	s.keyOnce.Do(func() {
		if s.eng.noMemo {
			return
		}
		in := memoInput{Engine: s.eng.id, Legacy: s.legacy, NoTwins: s.eng.noTwins, Workload: s.workload}
		for _, c := range s.claims {
			in.Claims = append(in.Claims, memoClaim{c.Namespace, &c.Spec})
		}
		for _, q := range s.reqs {
			in.Classes = append(in.Classes, memoClass{q.class.Name, &q.class.Spec})
		}
		if b, err := json.Marshal(in); err == nil {
			s.key = string(b)
		}
	})
	return s.key
}

// Ledger flags of a device, as stateKey reads them.
const (
	ledgerAllocated byte = 1 << iota
	ledgerShared
	ledgerConsumed
)

// stateKey is the ledger's entries for the devices of the view's pools,
// those the node may allocate and those that only consume counters:
// whether each is allocated, holds shares, and the capacity consumed.
// It also returns the flags of the view's devices, in view order, for
// the search to start from (seedLedger).
func (s *Session) stateKey(view *nodeView) ([]byte, []byte) {
	perDevice := 2
	if len(s.state.AggregatedCapacity) > 0 {
		perDevice = 32 // room for a consumed capacity or two
	}
	b := make([]byte, 0, perDevice*len(view.devices))
	flags := make([]byte, len(view.devices))
	var f byte
	for _, p := range view.pools {
		for i, d := range p.devices {
			b, f = s.appendLedgerEntry(b, d)
			flags[p.first+i] = f
		}
		for _, d := range p.others {
			b, _ = s.appendLedgerEntry(b, d)
		}
	}
	return b, flags
}

// appendLedgerEntry appends the device's ledger flags and consumed
// capacity, by name, to b.
func (s *Session) appendLedgerEntry(b []byte, d *device) ([]byte, byte) {
	consumed, hasConsumed := s.state.AggregatedCapacity[d.id]
	var f byte
	if s.state.AllocatedDevices.Has(d.id) {
		f |= ledgerAllocated
	}
	if s.shared[d.id] {
		f |= ledgerShared
	}
	if hasConsumed {
		f |= ledgerConsumed
	}
	b = append(b, f)
	// By name, sorted on the stack: a GPU consumes a few capacities.
	var buf [4]resourceapi.QualifiedName
	names := buf[:0]
	for n := range consumed {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b = appendConsumed(b, n, consumed[n])
	}
	return b, f
}

// appendConsumed appends one consumed capacity, by name and value: an
// integer as its digits, anything else in canonical form (each marked,
// so that the two cannot read alike). Formatting a quantity canonically
// was a quarter of the key's cost on shared-GPU fleets.
func appendConsumed(b []byte, name resourceapi.QualifiedName, q *resource.Quantity) []byte {
	b = append(b, name...)
	b = append(b, '=')
	if q != nil {
		if v, ok := q.AsInt64(); ok {
			b = strconv.AppendInt(append(b, 'i'), v, 10)
		} else {
			num, suffix := q.CanonicalizeBytes(nil)
			b = append(append(append(b, 'c'), num...), suffix...)
		}
	}
	return append(b, ';')
}

// seedLedger fills the run's per-device ledger caches from stateKey's
// flags, so that the search does not look the devices up again.
func (r *run) seedLedger(flags []byte) {
	for d, f := range flags {
		r.exclusive[d], r.holding[d] = 2, 2
		if f&ledgerAllocated != 0 {
			r.exclusive[d] = 1
		}
		// As Session.holds: consumed capacity counts unless legacy.
		if f&(ledgerAllocated|ledgerShared) != 0 || (!r.s.legacy && f&ledgerConsumed != 0) {
			r.holding[d] = 1
		}
	}
}

// adopt returns a remembered solution for this session: its picks point
// to the requests of the session that found it, this session's are the
// same by index.
func (s *Session) adopt(sol *solution) *solution {
	own := &solution{picks: make([][]pick, len(sol.picks)), subs: sol.subs, quality: sol.quality}
	for ci, picks := range sol.picks {
		own.picks[ci] = make([]pick, len(picks))
		for i, pk := range picks {
			pk.q = s.reqs[pk.q.idx]
			own.picks[ci][i] = pk
		}
	}
	return own
}
