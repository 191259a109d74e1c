package allocator

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The edge kinds of issue 17: inputs on which the engine once parted from
// upstream's allocator. newProblem makes each kind in edgeShare of its
// problems (so 7 x 6% = 42% of them have one kind each; the other 58% are
// ordinary), and TestDifferentialAgainstUpstream counts them, so that a
// change to the generator cannot quietly stop covering a kind.
type edgeKind int

const (
	edgeNone edgeKind = iota
	// Devices whose counter consumptions declare compatibility groups
	// (alpha in 1.37); the generator never turns the gate on, as the engine
	// refuses it (TestEdgeParity covers that).
	edgeCompatibilityGroups
	// A negative counter total or consumption.
	edgeNegativeCounters
	// Counter values beyond int64 milli-units, at the limits of int64 and
	// beyond int64 itself.
	edgeHugeCounters
	// Counter values finer than a milli-unit.
	edgeSubMilliCounters
	// A feature set that upstream routes to its "stable" allocator, with
	// counter slices of other nodes, pools that are incomplete or invalid
	// there, counter slices chosen by node selectors that do not parse,
	// and "All" requests.
	edgeStablePath
	// Per-device node selectors with two terms.
	edgeDeviceSelectorTerms
	// A slice node selector with two terms.
	edgeSliceSelectorTerms
	numEdgeKinds
)

// edgeShare is the share of generated problems of each edge kind.
const edgeShare = 0.06

var edgeKindNames = [numEdgeKinds]string{"ordinary", "compatibility-groups", "negative-counters", "huge-counters",
	"sub-milli-counters", "stable-path", "device-selector-terms", "slice-selector-terms"}

func (k edgeKind) String() string { return edgeKindNames[k] }

// wantsCounters: kinds that need partitionable pools to show.
func (k edgeKind) wantsCounters() bool {
	return k >= edgeCompatibilityGroups && k <= edgeStablePath
}

func (g *gen) edgeKind() edgeKind {
	x := g.r.Float64()
	for k := edgeCompatibilityGroups; k < numEdgeKinds; k++ {
		if x < float64(k)*edgeShare {
			return k
		}
	}
	return edgeNone
}

// stableFeatures is a random feature set within upstream's stable
// allocator's, mostly with partitionable devices on.
func (g *gen) stableFeatures() Features {
	return Features{
		AdminAccess:          g.chance(0.5),
		PrioritizedList:      g.chance(0.7),
		PartitionableDevices: g.chance(0.85),
		DeviceTaints:         g.chance(0.7),
	}
}

// addEdges changes the generated slices to contain the problem's kind.
func (g *gen) addEdges(slices []*resourceapi.ResourceSlice) {
	switch g.kind {
	case edgeCompatibilityGroups:
		g.compatibilityGroups(slices)
	case edgeNegativeCounters:
		g.negativeCounters(slices)
	case edgeHugeCounters:
		g.counterFamily(slices, hugeFamilies)
	case edgeSubMilliCounters:
		g.counterFamily(slices, subMilliFamilies)
	case edgeStablePath:
		g.counterSliceSelectors(slices)
	case edgeDeviceSelectorTerms:
		g.deviceSelectorTerms(slices)
	case edgeSliceSelectorTerms:
		g.sliceSelectorTerms(slices)
	}
}

// consumers returns the slices with devices that consume counters.
func consumers(slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if len(d.ConsumesCounters) > 0 {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func counterSlices(slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, s := range slices {
		if len(s.Spec.SharedCounters) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// compatibilityGroups gives some counter-consuming devices of one or two
// slices compatibility groups.
func (g *gen) compatibilityGroups(slices []*resourceapi.ResourceSlice) {
	cs := consumers(slices)
	for i := 0; i < len(cs) && i < 1+g.upTo(0.4); i++ {
		s := oneOf(g, cs...)
		for di := range s.Spec.Devices {
			d := &s.Spec.Devices[di]
			if len(d.ConsumesCounters) == 0 || !g.chance(0.6) {
				continue
			}
			d.ConsumesCounters[0].CompatibilityGroups = oneOf(g, []string{"a"}, []string{"a", "b"}, []string{"b"})
		}
	}
}

// negativeCounters makes a counter total or a consumption (or both)
// negative, as API validation allows.
func (g *gen) negativeCounters(slices []*resourceapi.ResourceSlice) {
	if cs := counterSlices(slices); len(cs) > 0 && g.chance(0.5) {
		s := oneOf(g, cs...)
		set := &s.Spec.SharedCounters[g.n(len(s.Spec.SharedCounters))]
		set.Counters[oneOf(g, "mem", "slice")] = resourceapi.Counter{Value: resource.MustParse(oneOf(g, "-1", "-4", "-10Gi"))}
	}
	if cs := consumers(slices); len(cs) > 0 && g.chance(0.7) {
		s := oneOf(g, cs...)
		for di := range s.Spec.Devices {
			d := &s.Spec.Devices[di]
			if len(d.ConsumesCounters) == 0 || !g.chance(0.5) {
				continue
			}
			d.ConsumesCounters[0].Counters[oneOf(g, "mem", "slice")] = resourceapi.Counter{Value: resource.MustParse(oneOf(g, "-1", "-2", "-20Gi"))}
		}
	}
}

// counterFamily is a total for every counter and what devices consume.
type counterFamily struct {
	total string
	uses  []string
}

var hugeFamilies = []counterFamily{
	{"3P", []string{"2P", "1P", "1500T", "2P"}},
	// At int64's limit: sums of these overflow int64.
	{"9223372036854775807", []string{"4611686018427387904", "4611686018427387903", "1", "9223372036854775807"}},
	// Beyond int64 even in whole units.
	{"10E", []string{"5E", "6E", "4E", "3"}},
	{"1e30", []string{"5e29", "6e29", "1e29"}},
	// Scales too far apart for one int64 unit.
	{"2E", []string{"1E", "1n", "1E", "999999999999999999"}},
}

var subMilliFamilies = []counterFamily{
	{"1m", []string{"500u", "500u", "1u", "999u", "250u"}},
	{"3n", []string{"1n", "2n", "1n"}},
	{"1500u", []string{"500u", "1m", "750u"}},
	{"2", []string{"1500m", "500m", "1n", "999999999n"}},
}

// counterFamily replaces the counters of the pools of one or two counter
// slices by values of one family.
func (g *gen) counterFamily(slices []*resourceapi.ResourceSlice, families []counterFamily) {
	cs := counterSlices(slices)
	for i := 0; i < len(cs) && i < 1+g.upTo(0.3); i++ {
		f := oneOf(g, families...)
		s := oneOf(g, cs...)
		name := oneOf(g, "mem", "slice")
		for si := range s.Spec.SharedCounters {
			s.Spec.SharedCounters[si].Counters[name] = resourceapi.Counter{Value: resource.MustParse(f.total)}
		}
		for _, other := range slices {
			if other.Spec.Driver != s.Spec.Driver || other.Spec.Pool.Name != s.Spec.Pool.Name {
				continue
			}
			for di := range other.Spec.Devices {
				for _, cc := range other.Spec.Devices[di].ConsumesCounters {
					if _, ok := cc.Counters[name]; ok {
						cc.Counters[name] = resourceapi.Counter{Value: resource.MustParse(oneOf(g, f.uses...))}
					}
				}
			}
		}
	}
}

// counterSliceSelectors lets some counter slices choose nodes by
// selector (one that does not parse, or one of the zones) or all nodes,
// which upstream's stable allocator never evaluates.
func (g *gen) counterSliceSelectors(slices []*resourceapi.ResourceSlice) {
	for _, s := range counterSlices(slices) {
		switch g.n(5) {
		case 0:
			s.Spec.NodeName = nil
			s.Spec.NodeSelector = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpGt, Values: []string{"a"}}},
			}}}
		case 1:
			s.Spec.NodeName = nil
			s.Spec.NodeSelector = zoneSelector(oneOf(g, "a", "b"))
		case 2:
			s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
		}
	}
}

func zoneSelector(zones ...string) *v1.NodeSelector {
	ns := &v1.NodeSelector{}
	for _, z := range zones {
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, v1.NodeSelectorTerm{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{z}}},
		})
	}
	return ns
}

// twoTerms is a two-term selector: either term may match node-0's zone.
func (g *gen) twoTerms() *v1.NodeSelector {
	return zoneSelector(oneOf(g, "a", "b", "c"), oneOf(g, "a", "b"))
}

// deviceSelectorTerms gives some per-device-selected devices two-term
// node selectors.
func (g *gen) deviceSelectorTerms(slices []*resourceapi.ResourceSlice) {
	for _, s := range slices {
		if !ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
			continue
		}
		for di := range s.Spec.Devices {
			d := &s.Spec.Devices[di]
			if g.chance(0.5) {
				d.NodeName, d.AllNodes, d.NodeSelector = nil, nil, g.twoTerms()
			}
		}
	}
}

// sliceSelectorTerms gives network slices two-term node selectors.
func (g *gen) sliceSelectorTerms(slices []*resourceapi.ResourceSlice) {
	for _, s := range slices {
		if s.Spec.NodeName == nil && len(s.Spec.Devices) > 0 && !ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
			s.Spec.AllNodes, s.Spec.NodeSelector = nil, g.twoTerms()
		}
	}
}

// edgeClaims makes "All" requests more frequent on the stable path,
// where other nodes' pools decide whether they fail.
func (g *gen) edgeClaims(claims []*resourceapi.ResourceClaim) {
	if g.kind != edgeStablePath || !g.chance(0.35) {
		return
	}
	r := &claims[0].Spec.Devices.Requests[0]
	if r.Exactly != nil {
		r.Exactly.AllocationMode, r.Exactly.Count = resourceapi.DeviceAllocationModeAll, 0
	}
}
