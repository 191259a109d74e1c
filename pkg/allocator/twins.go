package allocator

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Twins are devices of one node that nothing can tell apart except by
// their identity: the eight GPUs of an NVSwitch board, the two GPUs of an
// NVLink-bridged pair. Swapping two free twins turns every allocation into
// another one that is exactly as feasible and scores exactly the same, so
// the search, after trying one twin at a position, skips the later twins
// at that position (run.twinTried): of each set of such allocations it
// visits only the first in upstream's order, which is the one it would
// have chosen anyway (a later equal score never beats an earlier one).
//
// Two devices are twins when they are in the same pool, are exclusive
// (no allowMultipleAllocations, no shared counters), are not partitions
// and share their physical GPU with no other device of the node, have the
// same link-model description apart from that GPU and from group values
// (NVLink domain, PCIe root, NUMA node) no other device has, and have equal
// everything else the allocator reads (capacity, taints, binding
// conditions, node selection) and equal attributes, except attributes
// whose values differ on every device of the node that has them (uuid,
// index, PCI bus ID): equality on such an attribute relates no two
// devices, so a constraint sees twins alike. Selectors can still read
// those attributes, so the search also requires every request of the
// session to select both twins or neither (run.sameSelection).

// twins holds each device's twin class in a node view: -1 for a device
// without twins' guarantees, equal numbers for twins.
type twins struct {
	once  sync.Once
	class []int32
}

func (v *nodeView) twinClasses() []int32 {
	v.twin.once.Do(func() { v.twin.class = computeTwinClasses(v) })
	return v.twin.class
}

func computeTwinClasses(v *nodeView) []int32 {
	classes := make([]int32, len(v.devices))
	identity := identityAttributes(v.devices)
	links := newLinkFields(v.devices)
	ids := make(map[string]int32)
	for i, d := range v.devices {
		classes[i] = -1
		g := d.gpu()
		if d.multi || len(d.api.ConsumesCounters) > 0 || g.Partition || (g.Physical != "" && links.physical[g.Physical] > 1) {
			continue
		}
		key, ok := twinKey(v.devPool[i], d, links.normalize(g), identity)
		if !ok {
			continue
		}
		id, seen := ids[key]
		if !seen {
			id = int32(len(ids))
			ids[key] = id
		}
		classes[i] = id
	}
	return classes
}

// linkFields counts the values of the link model's fields on one node.
type linkFields struct {
	physical, nvlink, pcieSwitch, pcieRoot, clique map[string]int
	numa                                           map[int64]int
}

func newLinkFields(devices []*device) linkFields {
	f := linkFields{physical: map[string]int{}, nvlink: map[string]int{}, pcieSwitch: map[string]int{},
		pcieRoot: map[string]int{}, clique: map[string]int{}, numa: map[int64]int{}}
	for _, d := range devices {
		g := d.gpu()
		f.physical[g.Physical]++
		f.nvlink[g.NVLinkDomain]++
		f.pcieSwitch[g.PCIeSwitch]++
		f.pcieRoot[g.PCIeRoot]++
		f.clique[g.Clique]++
		f.numa[g.NUMA]++
	}
	return f
}

// linkKey is a device's link-model description without what tells it
// apart from its twins: its physical GPU, and each group value it alone
// has, which is left out and marked unique (a value links the device to
// nothing then, whatever it is).
type linkKey struct {
	GPU                                        topology.GPU
	NVLink, PCIeSwitch, PCIeRoot, Clique, NUMA bool // unique
}

func (f linkFields) normalize(g topology.GPU) linkKey {
	g.Physical = ""
	k := linkKey{}
	unique := func(v *string, counts map[string]int) bool {
		if *v != "" && counts[*v] == 1 {
			*v = ""
			return true
		}
		return false
	}
	k.NVLink = unique(&g.NVLinkDomain, f.nvlink)
	k.PCIeSwitch = unique(&g.PCIeSwitch, f.pcieSwitch)
	k.PCIeRoot = unique(&g.PCIeRoot, f.pcieRoot)
	k.Clique = unique(&g.Clique, f.clique)
	if g.NUMA >= 0 && f.numa[g.NUMA] == 1 {
		g.NUMA, k.NUMA = -1, true
	}
	k.GPU = g
	return k
}

// identityAttributes lists the attributes whose values differ on every
// device of the node that has them.
// Names are fully qualified (qualifiedName): a constraint on
// "gpu.example.com/model" reads a short "model" of that driver's devices
// and the full key of any device alike.
func identityAttributes(devices []*device) map[resourceapi.QualifiedName]bool {
	values := make(map[resourceapi.QualifiedName]map[string]bool)
	distinct := make(map[resourceapi.QualifiedName]bool)
	for _, d := range devices {
		for short, a := range d.api.Attributes {
			name := qualifiedName(d, short)
			seen := values[name]
			if seen == nil {
				seen = make(map[string]bool)
				values[name] = seen
				distinct[name] = true
			}
			v := attributeKey(a)
			if seen[v] {
				distinct[name] = false
			}
			seen[v] = true
		}
	}
	return distinct
}

// qualifiedName is the attribute's name with its domain: a short name is
// in the device's driver's domain.
func qualifiedName(d *device, name resourceapi.QualifiedName) resourceapi.QualifiedName {
	if strings.Contains(string(name), "/") {
		return name
	}
	return resourceapi.QualifiedName(d.slice.Spec.Driver + "/" + string(name))
}

func attributeKey(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "s:" + *a.StringValue
	case a.VersionValue != nil:
		return "v:" + *a.VersionValue
	case a.BoolValue != nil:
		if *a.BoolValue {
			return "b:true"
		}
		return "b:false"
	case a.IntValue != nil:
		b, _ := json.Marshal(*a.IntValue)
		return "i:" + string(b)
	}
	b, _ := json.Marshal(a)
	return "?:" + string(b)
}

// twinAttribute is one attribute in a twin key: its value is left out
// for identity attributes.
type twinAttribute struct {
	Name  resourceapi.QualifiedName
	Value *resourceapi.DeviceAttribute `json:",omitempty"`
}

// twinKey is everything the allocator reads of a device except its
// identity, written as JSON so that no two keys read alike; ok is false
// when it cannot be written down.
func twinKey(pool int32, d *device, links linkKey, identity map[resourceapi.QualifiedName]bool) (string, bool) {
	attrs := make([]twinAttribute, 0, len(d.api.Attributes))
	for _, key := range sortedKeys(d.api.Attributes) {
		a := twinAttribute{Name: qualifiedName(d, key)}
		if !identity[a.Name] {
			v := d.api.Attributes[key]
			a.Value = &v
		}
		attrs = append(attrs, a)
	}
	slices.SortStableFunc(attrs, func(a, b twinAttribute) int { return strings.Compare(string(a.Name), string(b.Name)) })
	b, err := json.Marshal(struct {
		Pool                     int32
		Driver                   string
		Links                    linkKey
		Attributes               []twinAttribute
		Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
		Taints                   []resourceapi.DeviceTaint
		BindsToNode              *bool
		BindingConditions        []string
		BindingFailureConditions []string
		NodeName                 *string
		NodeSelector             any
		AllNodes                 *bool
	}{pool, d.slice.Spec.Driver, links, attrs, d.api.Capacity, d.api.Taints, d.api.BindsToNode, d.api.BindingConditions,
		d.api.BindingFailureConditions, d.api.NodeName, d.api.NodeSelector, d.api.AllNodes})
	if err != nil {
		return "", false
	}
	return string(b), true
}

// twinsUsable reports whether the run may skip twins: not when some
// request asks for admin access (which may take devices in use) or the
// node has devices with several node selector terms (checked per
// solution).
func (r *run) twinsUsable() bool {
	if r.view.multiTerm {
		return false
	}
	for _, q := range r.s.reqs {
		if q.admin {
			return false
		}
	}
	return true
}

// twinTried reports whether device d is the twin of a device already
// tried at this position of the search (tried lists them).
func (r *run) twinTried(tried []int, d int) bool {
	classes := r.view.twinClasses()
	if classes[d] < 0 || r.ledgerHolds(d) {
		return false
	}
	for _, t := range tried {
		if classes[t] == classes[d] && !r.ledgerHolds(t) && r.sameSelection(t, d) {
			return true
		}
	}
	return false
}

// sameSelection reports whether every request of the session selects
// both devices or neither. An error on either device makes them no twins:
// the search then meets it where upstream would.
func (r *run) sameSelection(a, b int) bool {
	for _, q := range r.s.reqs {
		sa, err := r.selectable(q, a)
		if err != nil {
			return false
		}
		sb, err := r.selectable(q, b)
		if err != nil || sa != sb {
			return false
		}
	}
	return true
}
