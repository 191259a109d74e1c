package allocator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// selection says which devices of one node each request of a session may
// take: class and request selectors, per-device node selection, binding
// conditions. The memo's key reads it for every device (appendKey); the
// search then starts from what that found.
type selection struct {
	s    *Session
	ctx  context.Context
	node *v1.Node
	view *nodeView
	// slots hold, per req, the view's memo of each selector (viewmemo.go).
	slots [][][]atomic.Pointer[bool]
	// known is per req, per device: 0 unknown, 1 selected, 2 not.
	known [][]int8
}

func newSelection(ctx context.Context, s *Session, node *v1.Node, view *nodeView) *selection {
	return &selection{s: s, ctx: ctx, node: node, view: view, known: make([][]int8, len(s.reqs))}
}

// appendKey appends, per request and device, 1 when the request may take
// the device, 2 when not, 0 when the answer is an error (which the
// search meets where upstream would). The answers depend on nothing but
// the view (rebuilt when labels it read change) and the session's
// selectors, so the view keeps them by selectors: finding them device
// by device on every node of every cycle was a tenth of the Filter's
// time. Answers with an error are not kept.
func (x *selection) appendKey(b []byte) []byte {
	selectors := x.s.selectors()
	if known, key, ok := x.view.selections.find(selectors); ok {
		// A copy: the search fills in requests the key did not ask
		// about (none unless the view has no devices).
		x.known = slices.Clone(known)
		return append(b, key...)
	}
	start, kept := len(b), true
	for _, q := range x.s.reqs {
		for d := range x.view.devices {
			ok, err := x.selectable(q, d)
			switch {
			case err != nil:
				b, kept = append(b, 0), false
			case ok:
				b = append(b, 1)
			default:
				b = append(b, 2)
			}
		}
	}
	if kept {
		x.view.selections.keep(selectors, slices.Clone(x.known), slices.Clone(b[start:]))
	}
	return b
}

// selectors is what a session's selections read besides the view: the
// engine (its features, which also say whether upstream's stable
// allocator is served) and each request's selectors, the class's then
// its own. Computed once.
func (s *Session) selectors() string {
	s.selectorsOnce.Do(func() {
		b := binary.AppendUvarint(nil, s.eng.id)
		for _, q := range s.reqs {
			for _, sels := range [][]resourceapi.DeviceSelector{q.class.Spec.Selectors, q.selectors} {
				b = binary.AppendUvarint(b, uint64(len(sels)))
				for _, sel := range sels {
					if sel.CEL == nil { // an error; never kept
						b = append(b, 0)
						continue
					}
					b = binary.AppendUvarint(append(b, 1), uint64(len(sel.CEL.Expression)))
					b = append(b, sel.CEL.Expression...)
				}
			}
		}
		s.selectorsKey = string(b)
	})
	return s.selectorsKey
}

// keptSelections are a view's answers for the last few sessions'
// selectors.
type keptSelections struct {
	mu   sync.Mutex
	kept [maxKeptSelections]keptSelection
	next int
}

// keptSelection: known is only read once kept.
type keptSelection struct {
	selectors string
	known     [][]int8
	key       []byte
}

// maxKeptSelections: a fleet schedules pods of a few kinds at a time.
const maxKeptSelections = 4

func (k *keptSelections) find(selectors string) (known [][]int8, key []byte, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.kept {
		if e.known != nil && e.selectors == selectors {
			return e.known, e.key, true
		}
	}
	return nil, nil, false
}

func (k *keptSelections) keep(selectors string, known [][]int8, key []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept[k.next] = keptSelection{selectors: selectors, known: known, key: key}
	k.next = (k.next + 1) % maxKeptSelections
}

// selectable checks class and request selectors and per-device node
// selection, caching the answer per request and device; errors are not
// cached, so that the search meets them again.
func (x *selection) selectable(q *req, d int) (bool, error) {
	cache := x.known[q.idx]
	if cache == nil {
		cache = make([]int8, len(x.view.devices))
		x.known[q.idx] = cache
	}
	switch cache[d] {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	ok, err := x.check(q, d)
	if err != nil {
		return false, err
	}
	cache[d] = 2
	if ok {
		cache[d] = 1
	}
	return ok, nil
}

func (x *selection) check(q *req, d int) (bool, error) {
	dv := x.view.devices[d]
	if !x.s.eng.features.DeviceBindingAndStatus && len(dv.api.BindingConditions) > 0 {
		return false, nil
	}
	slots, k := x.selectorSlots(q), 0
	for set, selectors := range [][]resourceapi.DeviceSelector{q.class.Spec.Selectors, q.selectors} {
		for i, sel := range selectors {
			if sel.CEL == nil {
				return false, fmt.Errorf("%s: selector #%d: CEL expression empty (unsupported selector type?)", x.selectorOwner(q, set), i)
			}
			m, err := x.matchMemo(slots[k], d, sel.CEL.Expression)
			k++
			if err != nil {
				var ce errCompile
				if errors.As(err, &ce) {
					return false, fmt.Errorf("%s: selector #%d: %w", x.selectorOwner(q, set), i, err)
				}
				return false, fmt.Errorf("%s: selector #%d on device %s: %w", x.selectorOwner(q, set), i, dv.id, err)
			}
			if !m {
				return false, nil
			}
		}
	}
	if ptr.Deref(dv.slice.Spec.PerDeviceNodeSelection, false) {
		m, err := nodeMatches(x.node, ptr.Deref(dv.api.NodeName, ""), ptr.Deref(dv.api.AllNodes, false), dv.api.NodeSelector)
		if err != nil {
			return false, fmt.Errorf("ResourceSlice %s: device %s: %w", dv.slice.Name, dv.api.Name, err)
		}
		return m, nil
	}
	return true, nil
}

// selectorOwner names where selector set 0 (the class's) or 1 (the
// request's) of q comes from, for errors only.
func (x *selection) selectorOwner(q *req, set int) string {
	if set == 0 {
		return "class " + q.class.Name
	}
	return "claim " + klog.KObj(x.s.plans[q.claim].claim).String()
}

// selectorSlots returns, once per request, the view's memo of each of
// the request's selectors: the class's, then the request's own.
func (x *selection) selectorSlots(q *req) [][]atomic.Pointer[bool] {
	if x.slots == nil {
		x.slots = make([][][]atomic.Pointer[bool], len(x.s.reqs))
	}
	if s := x.slots[q.idx]; s != nil {
		return s
	}
	s := make([][]atomic.Pointer[bool], 0, len(q.class.Spec.Selectors)+len(q.selectors))
	for _, sels := range [][]resourceapi.DeviceSelector{q.class.Spec.Selectors, q.selectors} {
		for _, sel := range sels {
			var slots []atomic.Pointer[bool]
			if sel.CEL != nil {
				slots = x.view.matches.slots(memoKey{sel.CEL.Expression, x.s.legacy}, len(x.view.devices))
			}
			s = append(s, slots)
		}
	}
	x.slots[q.idx] = s
	return s
}

var matched, unmatched = true, false

// matchMemo is device.match through the view's memo.
func (x *selection) matchMemo(slots []atomic.Pointer[bool], d int, expression string) (bool, error) {
	if m := slots[d].Load(); m != nil {
		return *m, nil
	}
	m, err := x.view.devices[d].match(x.ctx, x.s.eng.celCache, expression, x.s.legacy)
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
