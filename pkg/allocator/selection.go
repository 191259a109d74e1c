package allocator

import (
	"context"
	"errors"
	"fmt"
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
// search meets where upstream would).
func (x *selection) appendKey(b []byte) []byte {
	for _, q := range x.s.reqs {
		for d := range x.view.devices {
			ok, err := x.selectable(q, d)
			switch {
			case err != nil:
				b = append(b, 0)
			case ok:
				b = append(b, 1)
			default:
				b = append(b, 2)
			}
		}
	}
	return b
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
