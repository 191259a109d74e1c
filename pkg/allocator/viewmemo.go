package allocator

import (
	"sync"
	"sync/atomic"
)

// viewMemo keeps per-device results of one node view by key (a selector
// expression, a capacity request), so that a run looks a key up once per
// node instead of once per device: on a 5,000-node fleet the per-device
// lookups, each hashing the whole expression under the device's lock,
// were a tenth of the scheduler's CPU. The devices' own caches stay
// behind it for devices that several nodes see and for new views.
type viewMemo[T any] struct {
	mu sync.Mutex
	m  map[memoKey][]atomic.Pointer[T]
}

// memoKey is a selector expression or a capacity request's key; flag is
// whether upstream's stable allocator is served (selectors) or fractional
// capacity ranges are on (capacity).
type memoKey struct {
	text string
	flag bool
}

// maxViewMemoKeys bounds a view's memo like the devices' caches: the
// keys come from pods, which come and go.
const maxViewMemoKeys = 64

// slots returns the key's result per device of the view (n devices); a
// nil slot is not known yet.
func (c *viewMemo[T]) slots(key memoKey, n int) []atomic.Pointer[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[key]; ok {
		return s
	}
	if c.m == nil {
		c.m = make(map[memoKey][]atomic.Pointer[T], 2)
	}
	if len(c.m) >= maxViewMemoKeys {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	s := make([]atomic.Pointer[T], n)
	c.m[key] = s
	return s
}

// capFitMemo is device.capFitFor through the view's memo.
func (r *run) capFitMemo(q *req, d int) *capFit {
	if r.capSlots == nil {
		r.capSlots = make([][]atomic.Pointer[capFit], len(r.s.reqs))
	}
	slots := r.capSlots[q.idx]
	if slots == nil {
		slots = r.view.capFits.slots(memoKey{q.capKey, r.f.FractionalCapacityRange}, len(r.view.devices))
		r.capSlots[q.idx] = slots
	}
	if f := slots[d].Load(); f != nil {
		return f
	}
	f := r.view.devices[d].capFitFor(q.capacity, q.capKey, r.f.FractionalCapacityRange)
	slots[d].Store(f)
	return f
}
