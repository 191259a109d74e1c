package allocator

import (
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
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

var matched, unmatched = true, false

// selectorSlots returns, once per run and request, the view's memo of
// each of the request's selectors: the class's, then the request's own.
func (r *run) selectorSlots(q *req) [][]atomic.Pointer[bool] {
	if r.selSlots == nil {
		r.selSlots = make([][][]atomic.Pointer[bool], len(r.s.reqs))
	}
	if s := r.selSlots[q.idx]; s != nil {
		return s
	}
	s := make([][]atomic.Pointer[bool], 0, len(q.class.Spec.Selectors)+len(q.selectors))
	for _, sels := range [][]resourceapi.DeviceSelector{q.class.Spec.Selectors, q.selectors} {
		for _, sel := range sels {
			var slots []atomic.Pointer[bool]
			if sel.CEL != nil {
				slots = r.view.matches.slots(memoKey{sel.CEL.Expression, r.s.legacy}, len(r.view.devices))
			}
			s = append(s, slots)
		}
	}
	r.selSlots[q.idx] = s
	return s
}

// matchMemo is device.match through the view's memo.
func (r *run) matchMemo(slots []atomic.Pointer[bool], d int, expression string) (bool, error) {
	if m := slots[d].Load(); m != nil {
		return *m, nil
	}
	m, err := r.view.devices[d].match(r.ctx, r.s.eng.celCache, expression, r.s.legacy)
	if err != nil {
		return false, err
	}
	if m {
		slots[d].Store(&matched)
	} else {
		slots[d].Store(&unmatched)
	}
	return m, nil
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
