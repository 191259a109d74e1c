package allocator

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gputopo/gputopo/pkg/topology"
)

// solutionMemo remembers solutions. Pods come from few templates and most
// nodes do not change between two scheduling cycles, so most Filter calls
// would repeat a search already done: on 5,000 nodes the search was half
// of gputopo's scheduler CPU. A solution is reused only when everything
// the search reads is the same: the session's claims, classes, engine and
// workload (Session.memoBucket, one bucket each), and the node's (nodeKey):
// its view's shape (shape.go), CPU and memory, what each request selects
// of its devices, and the ledger's entries for every device of its pools.
// Nodes of one model in one state share their solutions. A search that
// found nothing is kept too, as the parts of its message without the
// claims' names (most nodes of a full fleet have no room for a pod, and
// their searches were most of the calls), unless it is about a pool
// being updated or invalid (namesPools); other errors are not kept.
type solutionMemo struct {
	mu      sync.Mutex
	buckets map[string]*memoBucket
}

type memoBucket struct {
	mu      sync.Mutex
	entries map[string]memoEntry
}

// memoEntry is a solution, or (sol nil) why there is none.
type memoEntry struct {
	sol      *solution
	explored int
	failed   []failurePart
}

// maxMemoSessions bounds the memo by session: enough for the few pod
// templates a fleet schedules at a time and the learned workload's
// rebuilds. maxMemoEntries bounds a session's by node state: a fleet of
// a few models in many states. Past a bound an entry is dropped, a miss
// later, never a wrong answer.
const (
	maxMemoSessions = 16
	maxMemoEntries  = 4096
)

func newSolutionMemo() *solutionMemo {
	return &solutionMemo{buckets: make(map[string]*memoBucket)}
}

func (m *solutionMemo) bucket(session string) *memoBucket {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.buckets[session]; ok {
		return b
	}
	dropOne(m.buckets, maxMemoSessions)
	b := &memoBucket{entries: make(map[string]memoEntry)}
	m.buckets[session] = b
	return b
}

func (b *memoBucket) get(key []byte) (memoEntry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[string(key)]
	return e, ok
}

func (b *memoBucket) put(key []byte, e memoEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dropOne(b.entries, maxMemoEntries)
	b.entries[string(key)] = e
}

// dropOne deletes an arbitrary entry of m when it holds max or more.
func dropOne[V any](m map[string]V, limit int) {
	if len(m) < limit {
		return
	}
	for k := range m {
		delete(m, k)
		return
	}
}

// engineIDs tells engines apart in memo keys: an inventory, and so its
// memo, is shared by every engine that uses it.
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
	// Extended: an extended-resource claim, whose links are scored per
	// container (linkGroups).
	Extended bool
}

type memoClass struct {
	Name string
	Spec *resourceapi.DeviceClassSpec
}

// memoBucket holds the solutions of sessions like this one: of the same
// engine, claim specs, classes and workload; nil when the session cannot
// be keyed (the memo is then not used).
func (s *Session) memoBucket() *memoBucket {
	s.keyOnce.Do(func() {
		if s.eng.noMemo {
			return
		}
		in := memoInput{Engine: s.eng.id, Legacy: s.legacy, NoTwins: s.eng.noTwins, Workload: s.workload}
		for _, c := range s.claims {
			in.Claims = append(in.Claims, memoClaim{c.Namespace, &c.Spec, c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true"})
		}
		for _, q := range s.reqs {
			in.Classes = append(in.Classes, memoClass{q.class.Name, &q.class.Spec})
		}
		if b, err := json.Marshal(in); err == nil {
			s.bucket = s.inv.solved.bucket(string(b))
		}
	})
	return s.bucket
}

// Ledger flags of a device, as stateKey reads them.
const (
	ledgerAllocated byte = 1 << iota
	ledgerShared
	ledgerConsumed
)

// nodeKey is what the search reads of the node: its view's shape, its CPU
// and memory, what each request selects of its devices (sel, which keeps
// the answers for the search) and the ledger's entries for them
// (stateKey, whose flags it also returns for the search to start from).
func (s *Session) nodeKey(view *nodeView, host *HostUse, sel *selection) (key, flags []byte) {
	perDevice := 2 + len(s.reqs)
	if len(s.state.AggregatedCapacity) > 0 {
		perDevice += 32 // room for a consumed capacity or two
	}
	b := make([]byte, 0, 56+perDevice*len(view.devices))
	b = binary.LittleEndian.AppendUint64(b, s.inv.shapeID(view))
	b = appendHost(b, host)
	b = sel.appendKey(b)
	return s.stateKey(b, view)
}

// appendHost appends the node's CPU and memory as Packing reads them.
func appendHost(b []byte, host *HostUse) []byte {
	if host == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	for _, v := range []int64{host.Free.CPUMilli, host.Free.MemoryMiB, host.Pod.CPUMilli, host.Pod.MemoryMiB} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(host.Excluded))
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(host.Contention))
}

// stateKey appends to b the ledger's entries for the devices of the
// view's pools, those the node may allocate and those that only consume
// counters: whether each is allocated, holds shares, and the capacity
// consumed. It also returns the flags of the view's devices, in view
// order, for the search to start from (seedLedger).
func (s *Session) stateKey(b []byte, view *nodeView) ([]byte, []byte) {
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
	if len(consumed) == 0 {
		return b, f
	}
	// By name, sorted. The names are the device's own capacities (sorted
	// already), looked up rather than ranged over: starting to range over
	// a map cost more than the lookups. A name the device does not declare
	// (its slice changed since) sends the key the long way.
	start, found := len(b), 0
	for _, n := range d.capNames {
		if q, ok := consumed[n]; ok {
			b = appendConsumed(b, n, q)
			found++
		}
	}
	if found == len(consumed) {
		return b, f
	}
	b = b[:start]
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

// rememberedFailure is the error of a remembered search that found
// nothing, built once per session and entry: on a full fleet most nodes
// answer with one of a few, and writing the message for each was 2% of
// a replay. The memo keeps no failure of a view that names its pools, so
// the error does not depend on the view.
func (s *Session) rememberedFailure(view *nodeView, failed []failurePart) error {
	if len(failed) == 0 {
		return unsatisfiable(view, s.failureMessage(failed))
	}
	if err, ok := s.failures.Load(&failed[0]); ok {
		return err.(error)
	}
	err := unsatisfiable(view, s.failureMessage(failed))
	s.failures.Store(&failed[0], err)
	return err
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
