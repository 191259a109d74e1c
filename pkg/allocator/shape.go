package allocator

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// A view's shape is everything the search reads of it, by position, apart
// from names: two nodes of one model, with their own UUIDs, pools and
// device names, have one shape. The search only tells strings apart by
// equality, except in CEL selectors and the link model's product names,
// so the shape writes each string as the order of its first appearance
// in the view; selector results are part of the memo's key per
// allocation (selection.appendKey), and the link model's reading of a
// product name is in the shape as the description it produced. Equal
// shapes, ledgers, selections and CPU and memory make the search take the
// same steps on both nodes and pick the same devices by position, so a
// solution found on one node answers for the other (solutionmemo.go): a
// 5,000-node fleet of two models searches a few states instead of
// thousands of nodes.
//
// A view gets a shape only when all it sees is its own node's slices,
// without per-device node selection, counters beyond int64, or invalid
// pools; any other view gets an identity of its own, shared with no
// other view.

// shapeTable interns shapes, so that a memo key carries a number. It
// lives as long as the scheduler's inventories (Inventory.Refresh). It
// holds each shape's SHA-256, not the shape: a MIG node's is 75 kB.
type shapeTable struct {
	mu  sync.Mutex
	ids map[[sha256.Size]byte]uint64
}

// maxShapes bounds the table: fleets have a few node models, in a few
// states of their taints. A full table starts again empty, as shapes
// keep coming for as long as the scheduler runs (every new driver
// version is one); a shape seen before then gets a new number (memo
// misses until the memo learns it, never a wrong answer).
const maxShapes = 1024

// viewIdentities numbers shapes and views without one alike, so that the
// two never collide.
var viewIdentities atomic.Uint64

func newShapeTable() *shapeTable { return &shapeTable{ids: make(map[[sha256.Size]byte]uint64)} }

func (t *shapeTable) intern(shape []byte) uint64 {
	sum := sha256.Sum256(shape)
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[sum]; ok {
		return id
	}
	if len(t.ids) >= maxShapes {
		clear(t.ids)
	}
	id := viewIdentities.Add(1)
	t.ids[sum] = id
	return id
}

// shapeID returns the view's shape number, computed once per view.
func (inv *Inventory) shapeID(v *nodeView) uint64 {
	v.shapeOnce.Do(func() {
		if shape, ok := shapeOf(v); ok {
			v.shape = inv.shapes.intern(shape)
		} else {
			v.shape = viewIdentities.Add(1)
		}
	})
	return v.shape
}

// shapePool and shapeDevice are what shapeOf writes down. A pool's
// counters are as the search reads them: by set and name in index
// order, totals and each device's uses in the pool's unit (amounts.go),
// which depends on all of the pool's amounts.
type shapePool struct {
	Driver                        string
	Incomplete, BindingConditions bool
	Counters                      [][2]string
	Totals                        []int64
	Bound                         float64
	Devices                       []shapeDevice
}

type shapeDevice struct {
	// Device is the API object without its name, its attributes' strings
	// replaced by their numbers.
	Device resourceapi.Device
	GPU    topology.GPU
	Uses   [][2]int64
}

// shapeOf writes the view's shape down; ok is false when the view may
// not share one (see above).
func shapeOf(v *nodeView) ([]byte, bool) {
	if v.multiTerm {
		return nil, false
	}
	names := stringNumbers{}
	pools := make([]shapePool, 0, len(v.pools))
	for _, p := range v.pools {
		if p.invalid || p.exact != nil || len(p.others) > 0 {
			return nil, false
		}
		sp := shapePool{Driver: p.driver, Incomplete: p.incomplete, BindingConditions: p.hasBindingConditions,
			Totals: p.counterTotal, Bound: p.counterBound}
		for _, c := range p.counterNames {
			sp.Counters = append(sp.Counters, [2]string{c.set, c.counter})
		}
		for i, d := range p.devices {
			if ptr.Deref(d.slice.Spec.NodeName, "") != v.node || ptr.Deref(d.slice.Spec.PerDeviceNodeSelection, false) {
				return nil, false
			}
			sd := names.device(d)
			if p.uses != nil {
				for _, u := range p.uses[i] {
					sd.Uses = append(sd.Uses, [2]int64{int64(u.idx), u.milli})
				}
			}
			sp.Devices = append(sp.Devices, sd)
		}
		pools = append(pools, sp)
	}
	b, err := json.Marshal(pools)
	if err != nil {
		return nil, false
	}
	return b, true
}

// stringNumbers numbers the strings of one view in order of first
// appearance: a bijection, so equal strings stay equal and different
// ones different.
type stringNumbers map[string]string

func (n stringNumbers) of(s string) string {
	if s == "" {
		return ""
	}
	if num, ok := n[s]; ok {
		return num
	}
	num := "#" + strconv.Itoa(len(n))
	n[s] = num
	return num
}

func (n stringNumbers) device(d *device) shapeDevice {
	api := *d.api
	api.Name = ""
	// When a taint was added is not read by the search (tolerations
	// match key, value and effect), and the API server stamps it on
	// every new taint: nodes tainted alike share a shape.
	if len(api.Taints) > 0 {
		api.Taints = slices.Clone(api.Taints)
		for i := range api.Taints {
			api.Taints[i].TimeAdded = nil
		}
	}
	api.Attributes = make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(d.api.Attributes))
	// Sorted: numbers in an order the view's content fixes.
	for _, name := range sortedKeys(d.api.Attributes) {
		a := d.api.Attributes[name]
		if a.StringValue != nil {
			a.StringValue = ptr.To(n.of(*a.StringValue))
		}
		api.Attributes[name] = a
	}
	g := d.gpu()
	for _, s := range []*string{&g.Node, &g.Physical, &g.NVLinkDomain, &g.PCIeSwitch, &g.PCIeRoot, &g.Clique} {
		*s = n.of(*s)
	}
	return shapeDevice{Device: api, GPU: g}
}
