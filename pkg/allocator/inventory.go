package allocator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"
)

// Inventory indexes ResourceSlices once so that many pods and nodes can be
// allocated against them. Build a new one whenever the slices change; it
// never modifies the slices it was given. It is safe for concurrent use.
type Inventory struct {
	features     Features
	slicesOnNode map[string][]*resourceapi.ResourceSlice
	slicesShared []*resourceapi.ResourceSlice
	all          []*resourceapi.ResourceSlice

	mu sync.Mutex
	// devices holds one device object per slice device, shared by every
	// node that sees the slice, so that cached selector results are too.
	devices map[*resourceapi.ResourceSlice][]*device
	views   map[string]*nodeView
}

// NewInventory indexes slices. The scheduler passes them with
// DeviceTaintRules applied (its slice lister's ListWithDeviceTaintRules).
func NewInventory(slices []*resourceapi.ResourceSlice, features Features) *Inventory {
	inv := &Inventory{
		features:     features,
		slicesOnNode: make(map[string][]*resourceapi.ResourceSlice),
		all:          slices,
		devices:      make(map[*resourceapi.ResourceSlice][]*device),
		views:        make(map[string]*nodeView),
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
// is the same pointer). The scheduler calls it whenever slices change.
func (inv *Inventory) Refresh(slices []*resourceapi.ResourceSlice) *Inventory {
	next := NewInventory(slices, inv.features)
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, s := range slices {
		if ds, ok := inv.devices[s]; ok {
			next.devices[s] = ds
		}
	}
	return next
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
	// fragmentation and topology scoring need the node's name.
	node string
	uid  types.UID
	// byLabels: some slice or device selected this node by its labels;
	// labels is what they were then.
	byLabels bool
	labels   string
}

// pool is one resource pool as seen from one node.
type pool struct {
	driver, name  string
	incomplete    bool
	invalid       bool
	invalidReason string
	// devices targeting the node, in upstream's order: slices by name,
	// devices in slice order. first is the index of devices[0] in the
	// node view.
	devices []*device
	first   int
	// others are devices of the pool's generation in slices that do not
	// target the node. They never get allocated here but consume counters.
	others []*device
	// counters: the pool's shared counters, densely indexed.
	counterIndex map[counterKey]int
	counterNames []counterKey
	counterTotal []int64 // milli-units
	// uses[i] is what devices[i] consumes, otherUses[i] what others[i]
	// does; the dense counter index is per pool, so it lives here rather
	// than on devices shared by several nodes' pools.
	uses      [][]counterUse
	otherUses [][]counterUse
	// size[i] is sizeOf(i): the share of its counter sets devices[i] takes.
	size []float64
	// counterSet[i] is the dense set index of counter i; shapes[set] the
	// set's placements grouped by size (see partitions.go).
	counterSet           []int
	shapes               [][]shape
	shapeOf              []*shape // per device, nil unless a one-set placement
	hasBindingConditions bool
}

type counterKey struct{ set, counter string }

func (p *pool) String() string { return p.driver + "/" + p.name }

// view returns the node's view, building it on first use. The cache holds
// one view per node name; a view that depended on the node's labels
// (slices selecting nodes by label) is rebuilt when the labels change.
// Status updates, which change the node object often, keep the view.
func (inv *Inventory) view(node *v1.Node) (*nodeView, error) {
	inv.mu.Lock()
	v, ok := inv.views[node.Name]
	inv.mu.Unlock()
	if ok && v.uid == node.UID && (!v.byLabels || v.labels == labelsKey(node.Labels)) {
		return v, nil
	}
	v, err := inv.buildView(node)
	if err != nil {
		return nil, err
	}
	inv.mu.Lock()
	inv.views[node.Name] = v
	inv.mu.Unlock()
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
	bySlice, byLabels, err := inv.slicesFor(node)
	if err != nil {
		return nil, err
	}
	v := &nodeView{pools: inv.pools(bySlice), node: node.Name, uid: node.UID, byLabels: byLabels}
	if byLabels {
		v.labels = labelsKey(node.Labels)
	}
	for pi, p := range v.pools {
		p.first = len(v.devices)
		v.devices = append(v.devices, p.devices...)
		for range p.devices {
			v.devPool = append(v.devPool, int32(pi))
		}
	}
	return v, nil
}

// slicesFor gathers, per pool, the slices of its newest generation that
// node sees. byLabels reports whether any slice chose nodes by labels,
// so that views are cached per label set rather than per node.
func (inv *Inventory) slicesFor(node *v1.Node) (map[poolID][]*resourceapi.ResourceSlice, bool, error) {
	bySlice := make(map[poolID][]*resourceapi.ResourceSlice)
	byLabels := false
	consider := func(s *resourceapi.ResourceSlice) error {
		if !inv.features.PartitionableDevices && (s.Spec.PerDeviceNodeSelection != nil || len(s.Spec.SharedCounters) > 0) {
			return nil
		}
		relevant, labels, err := sliceSeenBy(node, s)
		byLabels = byLabels || labels
		if err != nil || !relevant {
			return err
		}
		id := poolID{s.Spec.Driver, s.Spec.Pool.Name}
		cur := bySlice[id]
		switch {
		case len(cur) == 0 || s.Spec.Pool.Generation > cur[0].Spec.Pool.Generation:
			bySlice[id] = []*resourceapi.ResourceSlice{s}
		case s.Spec.Pool.Generation == cur[0].Spec.Pool.Generation:
			bySlice[id] = append(cur, s)
		}
		return nil
	}
	for _, group := range [][]*resourceapi.ResourceSlice{inv.slicesOnNode[node.Name], inv.slicesShared} {
		for _, s := range group {
			if err := consider(s); err != nil {
				return nil, false, err
			}
		}
	}
	return bySlice, byLabels, nil
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
// sorted by driver and pool name, as upstream orders them.
func (inv *Inventory) pools(bySlice map[poolID][]*resourceapi.ResourceSlice) []*pool {
	var plain, withBinding []*pool
	for id, ss := range bySlice {
		want := ss[0].Spec.Pool.ResourceSliceCount
		var all []*resourceapi.ResourceSlice
		if int64(len(ss)) != want {
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
		if p.hasBindingConditions {
			withBinding = append(withBinding, p)
		} else {
			plain = append(plain, p)
		}
	}
	byID := func(a, b *pool) int {
		return cmp.Or(cmp.Compare(a.driver, b.driver), cmp.Compare(a.name, b.name))
	}
	slices.SortFunc(plain, byID)
	slices.SortFunc(withBinding, byID)
	return append(plain, withBinding...)
}

// poolGeneration looks at every slice of a pool: obsolete when any has a
// newer generation, otherwise all slices of the given generation.
func (inv *Inventory) poolGeneration(id poolID, gen int64) (bool, []*resourceapi.ResourceSlice) {
	var same []*resourceapi.ResourceSlice
	for _, s := range inv.all {
		if s.Spec.Driver != id.driver || s.Spec.Pool.Name != id.pool {
			continue
		}
		switch {
		case s.Spec.Pool.Generation > gen:
			return true, nil
		case s.Spec.Pool.Generation == gen:
			same = append(same, s)
		}
	}
	return false, same
}

func (inv *Inventory) buildPool(id poolID, targeting, all []*resourceapi.ResourceSlice) *pool {
	p := &pool{driver: id.driver, name: id.pool}
	partitionable := inv.features.PartitionableDevices
	counterSlices, deviceSlices, otherSlices := classifySlices(targeting, all, partitionable)
	invalid := func(reason string) *pool {
		return &pool{driver: id.driver, name: id.pool, invalid: true, invalidReason: reason}
	}
	if reason := duplicateDeviceName(deviceSlices); reason != "" {
		return invalid(reason)
	}
	for _, s := range deviceSlices {
		p.devices = append(p.devices, inv.devicesOf(s)...)
	}
	if !partitionable {
		p.markBindingConditions()
		return p
	}
	if reason := p.addCounters(counterSlices); reason != "" {
		return invalid(reason)
	}
	for _, s := range otherSlices {
		p.others = append(p.others, inv.devicesOf(s)...)
	}
	if reason := p.resolveConsumptions(); reason != "" {
		return invalid(reason)
	}
	p.markBindingConditions()
	return p
}

// classifySlices splits a pool's slices: those with shared counters (when
// partitionable devices are on), the other slices that target the node
// (sorted by name: their devices are the node's), and the pool's other
// slices elsewhere (all minus targeting), whose devices may consume the
// same counters.
func classifySlices(targeting, all []*resourceapi.ResourceSlice, partitionable bool) (counterSlices, deviceSlices, otherSlices []*resourceapi.ResourceSlice) {
	targeting = slices.Clone(targeting)
	slices.SortFunc(targeting, func(a, b *resourceapi.ResourceSlice) int { return cmp.Compare(a.Name, b.Name) })
	for _, s := range targeting {
		if partitionable && len(s.Spec.SharedCounters) > 0 {
			counterSlices = append(counterSlices, s)
		} else {
			deviceSlices = append(deviceSlices, s)
		}
	}
	if len(targeting) >= len(all) {
		return counterSlices, deviceSlices, nil
	}
	seen := make(map[string]bool, len(targeting))
	for _, s := range targeting {
		seen[s.Name] = true
	}
	for _, s := range all {
		if seen[s.Name] {
			continue
		}
		if partitionable && len(s.Spec.SharedCounters) > 0 {
			counterSlices = append(counterSlices, s)
		} else {
			otherSlices = append(otherSlices, s)
		}
	}
	return counterSlices, deviceSlices, otherSlices
}

// duplicateDeviceName: device names must be unique among the slices that
// target the node. It returns why the pool is invalid, or "".
func duplicateDeviceName(deviceSlices []*resourceapi.ResourceSlice) string {
	names := make(map[string]string)
	for _, s := range deviceSlices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if prev, dup := names[d.Name]; dup {
				return fmt.Sprintf("ResourceSlice %s: device %s: duplicate device name (also in ResourceSlice %s)", s.Name, d.Name, prev)
			}
			names[d.Name] = s.Name
		}
	}
	return ""
}

// addCounters indexes the pool's shared counters. It returns why the
// pool is invalid, or "".
func (p *pool) addCounters(counterSlices []*resourceapi.ResourceSlice) string {
	p.counterIndex = make(map[counterKey]int)
	setSeen := make(map[string]string)
	for _, s := range counterSlices {
		for _, cs := range s.Spec.SharedCounters {
			if prev, dup := setSeen[cs.Name]; dup {
				return fmt.Sprintf("ResourceSlice %s: sharedCounters %s: duplicate counter set name (also in ResourceSlice %s)", s.Name, cs.Name, prev)
			}
			setSeen[cs.Name] = s.Name
			for _, name := range sortedKeys(cs.Counters) {
				v := cs.Counters[name].Value
				if v.Sign() < 0 {
					return fmt.Sprintf("ResourceSlice %s: sharedCounters %s: counter %s: negative value %s", s.Name, cs.Name, name, v.String())
				}
				k := counterKey{cs.Name, name}
				p.counterIndex[k] = len(p.counterNames)
				p.counterNames = append(p.counterNames, k)
				p.counterTotal = append(p.counterTotal, milliFloor(v))
			}
		}
	}
	return ""
}

// resolveConsumptions resolves what each device of the node (and each of
// the pool's devices elsewhere) consumes of the counters. It returns why
// the pool is invalid, or "".
func (p *pool) resolveConsumptions() string {
	p.uses = make([][]counterUse, len(p.devices))
	for i, d := range p.devices {
		u, err := p.resolveConsumption(d)
		if err != nil {
			return err.Error()
		}
		p.uses[i] = u
	}
	p.buildShapes()
	p.otherUses = make([][]counterUse, len(p.others))
	for i, d := range p.others {
		u, err := p.resolveConsumption(d)
		if err != nil {
			return err.Error()
		}
		p.otherUses[i] = u
	}
	return ""
}

func (p *pool) markBindingConditions() {
	for _, d := range p.devices {
		if d.api.BindingConditions != nil {
			p.hasBindingConditions = true
			return
		}
	}
}

// resolveConsumption checks that every counter a device consumes exists
// and records the consumption against the pool's dense counter index.
func (p *pool) resolveConsumption(d *device) ([]counterUse, error) {
	var uses []counterUse
	for _, cc := range d.api.ConsumesCounters {
		found := false
		for _, k := range p.counterNames {
			if k.set == cc.CounterSet {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("ResourceSlice %s: device %s: consumesCounters: counter set %s not found", d.slice.Name, d.api.Name, cc.CounterSet)
		}
		for _, name := range sortedKeys(cc.Counters) {
			idx, ok := p.counterIndex[counterKey{cc.CounterSet, name}]
			if !ok {
				return nil, fmt.Errorf("ResourceSlice %s: device %s: consumesCounters: counter %s not found in counter set %s", d.slice.Name, d.api.Name, name, cc.CounterSet)
			}
			v := cc.Counters[name].Value
			if v.Sign() < 0 {
				return nil, fmt.Errorf("ResourceSlice %s: device %s: consumesCounters: counter %s in set %s: negative value %s", d.slice.Name, d.api.Name, name, cc.CounterSet, v.String())
			}
			uses = append(uses, counterUse{idx: idx, milli: milliCeil(v)})
		}
	}
	return uses, nil
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
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

func (p *pool) usesOf(i int) []counterUse {
	if p.uses == nil {
		return nil
	}
	return p.uses[i]
}
