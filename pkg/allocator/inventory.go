package allocator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Inventory indexes ResourceSlices once so that many pods and nodes can be
// allocated against them. Build a new one whenever the slices change; it
// never modifies the slices it was given. It is safe for concurrent use.
type Inventory struct {
	features Features
	// legacy: upstream serves these features with its stable allocator,
	// which gathers pools differently (see gathered).
	legacy       bool
	slicesOnNode map[string][]*resourceapi.ResourceSlice
	slicesShared []*resourceapi.ResourceSlice
	all          []*resourceapi.ResourceSlice

	mu sync.Mutex
	// devices holds one device object per slice device, shared by every
	// node that sees the slice, so that cached selector results are too.
	devices map[*resourceapi.ResourceSlice][]*device
	// views, one per node name, are read on every Filter call from every
	// Filter goroutine and written once per node: under a lock of their
	// own, a read lock for reads.
	viewsMu sync.RWMutex
	views   map[string]*nodeView
	// shapes and solved outlive the inventory: Refresh hands them on, as
	// what they hold is keyed by content (shape.go, solutionmemo.go).
	shapes *shapeTable
	solved *solutionMemo
}

// NewInventory indexes slices. The scheduler passes them with
// DeviceTaintRules applied (its slice lister's ListWithDeviceTaintRules).
func NewInventory(slices []*resourceapi.ResourceSlice, features Features) *Inventory {
	inv := &Inventory{
		features:     features,
		legacy:       isLegacy(features),
		slicesOnNode: make(map[string][]*resourceapi.ResourceSlice),
		all:          slices,
		devices:      make(map[*resourceapi.ResourceSlice][]*device),
		views:        make(map[string]*nodeView),
		shapes:       newShapeTable(),
		solved:       newSolutionMemo(),
	}
	for _, s := range slices {
		if n := ptr.Deref(s.Spec.NodeName, ""); n != "" {
			inv.slicesOnNode[n] = append(inv.slicesOnNode[n], s)
		} else {
			inv.slicesShared = append(inv.slicesShared, s)
		}
	}
	return inv
}

// Refresh returns an Inventory for a new set of slices that keeps the
// device objects, and so the cached selector results, of every slice that
// did not change (informers replace changed objects, so an unchanged slice
// is the same pointer), the remembered solutions, and the view of every
// node whose view cannot have changed (keepViews). The scheduler calls it
// whenever slices change: a node agent's taint or a rolling upgrade
// changes a few nodes' slices at a time, and rebuilding every view made
// the next cycle cost as much as a cold start (17 times a warm one on
// 5,000 GPU nodes, 250 times on MIG nodes). With the same slices it
// returns inv itself.
func (inv *Inventory) Refresh(slices []*resourceapi.ResourceSlice) *Inventory {
	if sameElements(inv.all, slices) {
		return inv
	}
	next := NewInventory(slices, inv.features)
	next.shapes, next.solved = inv.shapes, inv.solved
	inv.mu.Lock()
	for _, s := range slices {
		if ds, ok := inv.devices[s]; ok {
			next.devices[s] = ds
		}
	}
	inv.mu.Unlock()
	inv.keepViews(next)
	return next
}

// keepViews hands on to next the views that read nothing but their
// node's own slices and the slices without a node name, where both are
// the same. A view that read further (the stable path reads every slice;
// a pool whose slices on the node are not all of it looks at the rest)
// is built again. view checks the node's UID and labels as for any
// cached view.
//
// A node without slices of its own (a CPU node, which Filter sees too;
// one that reaches network-attached devices only) keeps its view until
// maxIdleRefreshes in a row pass without it being asked for: views are
// kept by node name, and an autoscaler names every node anew, so the
// views of nodes long deleted would otherwise pile up, one per node ever
// seen. A deleted GPU node's view goes with its slices.
func (inv *Inventory) keepViews(next *Inventory) {
	const maxIdleRefreshes = 16
	if inv.legacy || next.legacy || !sameElements(inv.slicesShared, next.slicesShared) {
		return
	}
	inv.viewsMu.RLock()
	defer inv.viewsMu.RUnlock()
	for name, v := range inv.views {
		own := next.slicesOnNode[name]
		if v.readsOtherNodes || !sameElements(inv.slicesOnNode[name], own) {
			continue
		}
		if len(own) > 0 || v.idle.Add(1) <= maxIdleRefreshes {
			next.views[name] = v
		}
	}
}

// sameElements reports whether a and b hold the same elements, in any
// order: informers replace an object that changes, so the same slice
// pointers mean the same slices (and the lister's order is its own).
func sameElements[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) <= 8 { // a node's few slices: no map
		for _, x := range a {
			if !slices.Contains(b, x) {
				return false
			}
		}
		return true
	}
	seen := make(map[T]struct{}, len(a))
	for _, x := range a {
		seen[x] = struct{}{}
	}
	for _, x := range b {
		if _, ok := seen[x]; !ok {
			return false
		}
	}
	return true
}

// Slices returns the slices the inventory was built from.
func (inv *Inventory) Slices() []*resourceapi.ResourceSlice { return inv.all }

// nodeView is what one node sees: its pools in upstream's order, and every
// device of those pools that the node may allocate, numbered densely so
// that per-allocation state fits in slices instead of maps.
type nodeView struct {
	pools   []*pool
	devices []*device // allocatable candidates, in search order
	devPool []int32   // pool index of each device
	role    roles
	twin    twins
	// matches and capFits memoize per-device results (viewmemo.go).
	matches viewMemo[bool]
	capFits viewMemo[capFit]
	// selections keeps what the requests of recent sessions select
	// (selection.go).
	selections keptSelections
	// shape numbers the view for the solution memo (shape.go).
	shapeOnce sync.Once
	shape     uint64
	// readsOtherNodes: building the view read slices of other nodes (a
	// pool whose slices here were not all of it), so Refresh does not
	// hand it on.
	readsOtherNodes bool
	// fragmentation and topology scoring need the node's name.
	node string
	uid  types.UID
	// idle counts the Refreshes since the view was last asked for
	// (keepViews).
	idle atomic.Int32
	// byLabels: some slice or device selected this node by its labels;
	// labels is what they were then.
	byLabels bool
	labels   string
	// multiTerm: some device comes with a node selector of several
	// terms, which upstream cannot put in an allocation (see
	// run.selectorsBuild).
	multiTerm bool
}

// view returns the node's view, building it on first use. The cache holds
// one view per node name; a view that depended on the node's labels
// (slices selecting nodes by label) is rebuilt when the labels change.
// Status updates, which change the node object often, keep the view.
func (inv *Inventory) view(node *v1.Node) (*nodeView, error) {
	inv.viewsMu.RLock()
	v, ok := inv.views[node.Name]
	inv.viewsMu.RUnlock()
	if ok && v.uid == node.UID && (!v.byLabels || v.labels == labelsKey(node.Labels)) {
		if v.idle.Load() != 0 { // a read, not a write, on every Filter call
			v.idle.Store(0)
		}
		return v, nil
	}
	v, err := inv.buildView(node)
	if err != nil {
		return nil, err
	}
	inv.viewsMu.Lock()
	inv.views[node.Name] = v
	inv.viewsMu.Unlock()
	return v, nil
}

// labelsKey is a canonical form of a label set.
func labelsKey(labels map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(labels) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

type poolID struct{ driver, pool string }

func (inv *Inventory) buildView(node *v1.Node) (*nodeView, error) {
	g, err := inv.gather(node)
	if err != nil {
		return nil, err
	}
	pools, readsOthers := inv.pools(g)
	v := &nodeView{pools: pools, readsOtherNodes: readsOthers, node: node.Name, uid: node.UID, byLabels: g.byLabels}
	if g.byLabels {
		v.labels = labelsKey(node.Labels)
	}
	for pi, p := range v.pools {
		p.first = len(v.devices)
		v.devices = append(v.devices, p.devices...)
		for range p.devices {
			v.devPool = append(v.devPool, int32(pi))
		}
	}
	v.multiTerm = multiTermSelectors(v.devices)
	return v, nil
}

// gathered is, per pool, the slices of its newest generation that a node
// sees, and the pools in the order their first slice was seen.
type gathered struct {
	byPool map[poolID][]*resourceapi.ResourceSlice
	order  []poolID
	// byLabels: some slice chose nodes by labels, so that views are
	// cached per label set rather than per node.
	byLabels bool
}

// gather collects the slices node sees, as upstream does: its own slices,
// then those without a node name. On the stable path it reads every
// slice in input order as that allocator does, and takes every slice
// with shared counters whatever node it names (without evaluating its
// node selector); the order of first sight is then the pool order (see
// pools).
func (inv *Inventory) gather(node *v1.Node) (*gathered, error) {
	g := &gathered{byPool: make(map[poolID][]*resourceapi.ResourceSlice)}
	groups := [][]*resourceapi.ResourceSlice{inv.slicesOnNode[node.Name], inv.slicesShared}
	if inv.legacy {
		groups = [][]*resourceapi.ResourceSlice{inv.all}
	}
	for _, group := range groups {
		for _, s := range group {
			if err := inv.consider(g, node, s); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// consider adds slice s to g if node sees it.
func (inv *Inventory) consider(g *gathered, node *v1.Node, s *resourceapi.ResourceSlice) error {
	if !inv.features.PartitionableDevices && (s.Spec.PerDeviceNodeSelection != nil || len(s.Spec.SharedCounters) > 0) {
		return nil
	}
	if topology.UsesCompatibilityGroups(s) {
		return nil
	}
	if !inv.legacy || len(s.Spec.SharedCounters) == 0 {
		relevant, labels, err := sliceSeenBy(node, s)
		g.byLabels = g.byLabels || labels
		if err != nil || !relevant {
			return err
		}
	}
	id := poolID{s.Spec.Driver, s.Spec.Pool.Name}
	cur, seen := g.byPool[id]
	if !seen {
		g.order = append(g.order, id)
	}
	switch {
	case len(cur) == 0 || s.Spec.Pool.Generation > cur[0].Spec.Pool.Generation:
		g.byPool[id] = []*resourceapi.ResourceSlice{s}
	case s.Spec.Pool.Generation == cur[0].Spec.Pool.Generation:
		g.byPool[id] = append(cur, s)
	}
	return nil
}

// sliceSeenBy reports whether node sees any device of the slice, and
// whether that was decided by node labels.
func sliceSeenBy(node *v1.Node, s *resourceapi.ResourceSlice) (relevant, byLabels bool, err error) {
	nodeName, allNodes := ptr.Deref(s.Spec.NodeName, ""), ptr.Deref(s.Spec.AllNodes, false)
	switch {
	case nodeName != "" || allNodes || s.Spec.NodeSelector != nil:
		m, err := nodeMatches(node, nodeName, allNodes, s.Spec.NodeSelector)
		if err != nil {
			return false, false, fmt.Errorf("ResourceSlice %s: spec.nodeSelector: %w", s.Name, err)
		}
		return m, nodeName == "" && !allNodes, nil
	case ptr.Deref(s.Spec.PerDeviceNodeSelection, false):
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			m, err := nodeMatches(node, ptr.Deref(d.NodeName, ""), ptr.Deref(d.AllNodes, false), d.NodeSelector)
			if err != nil {
				return false, true, fmt.Errorf("ResourceSlice %s: device %s: nodeSelector: %w", s.Name, d.Name, err)
			}
			if m {
				return true, true, nil
			}
		}
		return false, true, nil
	}
	return false, false, nil
}

// pools builds the node's pools from their slices (a pool missing
// slices as an empty one marked incomplete, a pool with newer slices
// elsewhere not at all): pools with binding conditions last, each part
// sorted by driver and pool name, as upstream orders them. The stable
// allocator iterates a map filled in order of first sight instead; that
// order is the one its iteration takes most often (see
// upstreamMaySay in differential_test.go), and the engine takes it.
// readsOthers: some pool's slices were looked up among every node's.
func (inv *Inventory) pools(g *gathered) (ps []*pool, readsOthers bool) {
	var plain, withBinding []*pool
	for _, id := range g.order {
		ss := g.byPool[id]
		want := ss[0].Spec.Pool.ResourceSliceCount
		var all []*resourceapi.ResourceSlice
		if int64(len(ss)) != want {
			readsOthers = true
			obsolete, same := inv.poolGeneration(id, ss[0].Spec.Pool.Generation)
			if obsolete {
				continue
			}
			if int64(len(same)) != want {
				plain = append(plain, &pool{driver: id.driver, name: id.pool, incomplete: true})
				continue
			}
			all = same
		}
		p := inv.buildPool(id, ss, all)
		if p.hasBindingConditions && !inv.legacy {
			withBinding = append(withBinding, p)
		} else {
			plain = append(plain, p)
		}
	}
	if inv.legacy {
		return plain, readsOthers
	}
	byID := func(a, b *pool) int {
		return cmp.Or(cmp.Compare(a.driver, b.driver), cmp.Compare(a.name, b.name))
	}
	slices.SortFunc(plain, byID)
	slices.SortFunc(withBinding, byID)
	return append(plain, withBinding...), readsOthers
}

// poolGeneration looks at every slice of a pool: obsolete when any has a
// newer generation, otherwise all slices of the given generation, less
// those with compatibility groups (ignored, as in gather, so that they
// leave the pool incomplete).
func (inv *Inventory) poolGeneration(id poolID, gen int64) (bool, []*resourceapi.ResourceSlice) {
	var same []*resourceapi.ResourceSlice
	for _, s := range inv.all {
		if s.Spec.Driver != id.driver || s.Spec.Pool.Name != id.pool {
			continue
		}
		switch {
		case s.Spec.Pool.Generation > gen:
			return true, nil
		case s.Spec.Pool.Generation == gen && !topology.UsesCompatibilityGroups(s):
			same = append(same, s)
		}
	}
	return false, same
}

// devicesOf returns the device objects of a slice, creating them once.
func (inv *Inventory) devicesOf(s *resourceapi.ResourceSlice) []*device {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if ds, ok := inv.devices[s]; ok {
		return ds
	}
	ds := make([]*device, len(s.Spec.Devices))
	for i := range s.Spec.Devices {
		ds[i] = newDevice(s, i)
	}
	inv.devices[s] = ds
	return ds
}

func nodeMatches(node *v1.Node, nodeName string, allNodes bool, sel *v1.NodeSelector) (bool, error) {
	switch {
	case nodeName != "":
		return node != nil && node.Name == nodeName, nil
	case allNodes:
		return true, nil
	case sel != nil:
		s, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return false, fmt.Errorf("parse node selector: %w", err)
		}
		return s.Match(node), nil
	}
	return false, nil
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// locate returns the pool index of a device and its index in that pool.
func (v *nodeView) locate(d int) (int, int) {
	pi := int(v.devPool[d])
	return pi, d - v.pools[pi].first
}
