package allocator

import (
	"fmt"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Variations widen the generated problems where a review of upstream's
// allocator found branches the base generator could not reach: richer
// tolerations and taints, several selectors and constraints per request,
// "All" subrequests, shared devices without capacity, pools whose slices
// sit on two nodes, more than a claim's 32 devices, attributes that
// identify each device (the engine's twins leave them out), the topology
// attributes gputopo's scores read, and the node's CPU and memory that
// packing counts. Each applies to a
// share of problems after the base generator is done, so the problems
// without one are the same as before; TestDifferentialAgainstUpstream
// counts them, so that none quietly stops being made.
type variation int

const (
	varTolerations variation = iota
	varSelectors
	varConstraints
	varAllSubrequest
	varSharedWithoutCapacity
	varPoolOnTwoNodes
	varOver32Devices
	varIdentities
	varTopology
	varHost
	numVariations
)

var variationNames = [numVariations]string{"tolerations", "selectors", "constraints", "all-subrequest",
	"shared-without-capacity", "pool-on-two-nodes", "over-32-devices", "identities", "topology", "host"}

func (v variation) String() string { return variationNames[v] }

// variationShare is the chance of each variation per problem.
const variationShare = 0.08

// vary applies the variations drawn for p and records them.
func (g *gen) vary(p *problem) {
	apply := [numVariations]func(*problem) bool{
		g.varyTolerations, g.varySelectors, g.varyConstraints, g.varyAllSubrequest,
		g.varySharedWithoutCapacity, g.varyPoolOnTwoNodes, g.varyOver32Devices, g.varyIdentities,
		g.varyTopology, g.varyHost,
	}
	for v := range numVariations {
		if g.chance(variationShare) && apply[v](p) {
			p.variations = append(p.variations, v)
		}
	}
}

// requestsOf lists every request and subrequest of the claims, as the
// parts a variation may change.
type requestPart struct {
	selectors   *[]resourceapi.DeviceSelector
	tolerations *[]resourceapi.DeviceToleration
}

func requestsOf(claims []*resourceapi.ResourceClaim) []requestPart {
	var out []requestPart
	for _, c := range claims {
		for i := range c.Spec.Devices.Requests {
			r := &c.Spec.Devices.Requests[i]
			if r.Exactly != nil {
				out = append(out, requestPart{&r.Exactly.Selectors, &r.Exactly.Tolerations})
			}
			for j := range r.FirstAvailable {
				s := &r.FirstAvailable[j]
				out = append(out, requestPart{&s.Selectors, &s.Tolerations})
			}
		}
	}
	return out
}

// varyTolerations: Equal tolerations with matching and other values, an
// empty key tolerating every taint, tolerations limited to one effect,
// and devices with two taints of which a request may tolerate one.
func (g *gen) varyTolerations(p *problem) bool {
	tolerations := []resourceapi.DeviceToleration{
		{Key: "broken", Operator: resourceapi.DeviceTolerationOpEqual, Value: "x"},
		{Key: "maint", Operator: resourceapi.DeviceTolerationOpEqual, Value: "y"},
		{Operator: resourceapi.DeviceTolerationOpExists},
		{Key: "maint", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule},
		{Key: "broken", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute},
	}
	for _, r := range requestsOf(p.claims) {
		if g.chance(0.5) {
			*r.tolerations = []resourceapi.DeviceToleration{oneOf(g, tolerations...)}
		}
	}
	for _, d := range g.devices {
		if len(d.dev.Taints) > 0 && g.chance(0.5) {
			d.dev.Taints = append(d.dev.Taints, resourceapi.DeviceTaint{Key: "maint", Value: oneOf(g, "x", "y"),
				Effect: oneOf(g, resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute)})
		}
	}
	return true
}

// varySelectors gives requests several selectors: one that is false on
// GPUs before one that errors on them (upstream never evaluates the
// second there), one that errors on NICs after one that is true on them,
// and, rarely, one that does not compile.
func (g *gen) varySelectors(p *problem) bool {
	sets := [][]resourceapi.DeviceSelector{
		{celSel(`device.driver == "nic.example.com"`), celSel(`device.attributes["nic.example.com"].model != ""`)},
		{celSel(`device.driver == "gpu.example.com"`), celSel(`device.attributes["gpu.example.com"].mem >= 40`)},
		{celSel(`"model" in device.attributes[device.driver]`), celSel(`device.attributes[device.driver].model != "l4"`), celSel(`device.driver != ""`)},
		{celSel(`device.attributes["gpu.example.com"].mem >= 40`), celSel(`device.driver == "gpu.example.com"`)},
	}
	changed := false
	for _, r := range requestsOf(p.claims) {
		if !g.chance(0.5) {
			continue
		}
		*r.selectors = append(*r.selectors, oneOf(g, sets...)...)
		if g.chance(0.05) {
			*r.selectors = append(*r.selectors, celSel(`device.attributes[`))
		}
		changed = true
	}
	return changed
}

// varyConstraints adds constraints: a second one on a claim (whose failure
// must undo the first's choice), and ones naming two of its requests.
func (g *gen) varyConstraints(p *problem) bool {
	attrs := []string{"gpu.example.com/model", "gpu.example.com/mem", "nic.example.com/model", "resource.kubernetes.io/pcieRoot"}
	changed := false
	for _, c := range p.claims {
		if !g.chance(0.6) {
			continue
		}
		var names []string
		for _, r := range c.Spec.Devices.Requests {
			names = append(names, r.Name)
		}
		for range 1 + g.n(2) {
			con := resourceapi.DeviceConstraint{}
			attr := ptr.To(resourceapi.FullyQualifiedName(oneOf(g, attrs...)))
			if g.chance(0.5) {
				con.MatchAttribute = attr
			} else {
				con.DistinctAttribute = attr
			}
			if len(names) > 1 && g.chance(0.6) {
				i := g.n(len(names))
				con.Requests = []string{names[i], names[(i+1)%len(names)]}
			}
			c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, con)
		}
		changed = true
	}
	return changed
}

// varyAllSubrequest makes a firstAvailable alternative take all matching
// devices.
func (g *gen) varyAllSubrequest(p *problem) bool {
	changed := false
	for _, c := range p.claims {
		for i := range c.Spec.Devices.Requests {
			subs := c.Spec.Devices.Requests[i].FirstAvailable
			if len(subs) == 0 {
				continue
			}
			s := &subs[g.n(len(subs))]
			s.AllocationMode, s.Count = resourceapi.DeviceAllocationModeAll, 0
			changed = true
		}
	}
	return changed
}

// varySharedWithoutCapacity drops the capacity of shared devices, and of
// the ledger's entries for them, which then hold share IDs only.
func (g *gen) varySharedWithoutCapacity(p *problem) bool {
	changed := false
	for _, d := range g.devices {
		if !ptr.Deref(d.dev.AllowMultipleAllocations, false) || !g.chance(0.6) {
			continue
		}
		d.dev.Capacity = nil
		id := structured.MakeDeviceID(d.driver, d.pool, d.dev.Name)
		delete(p.state.AggregatedCapacity, id)
		changed = true
	}
	return changed
}

// varyPoolOnTwoNodes moves one slice of a pool with several to the other
// node: the pool is complete only counting both, and a partitionable
// pool's counters are shared across them.
func (g *gen) varyPoolOnTwoNodes(p *problem) bool {
	slicesOf := map[string][]*resourceapi.ResourceSlice{}
	var pools []string
	for _, s := range p.slices {
		if s.Spec.NodeName == nil {
			continue
		}
		key := s.Spec.Driver + "/" + s.Spec.Pool.Name
		if slicesOf[key] == nil {
			pools = append(pools, key)
		}
		slicesOf[key] = append(slicesOf[key], s)
	}
	for _, key := range pools {
		ss := slicesOf[key]
		if len(ss) < 2 || !g.chance(0.5) {
			continue
		}
		s := ss[g.n(len(ss))]
		if *s.Spec.NodeName == "node-0" {
			s.Spec.NodeName = ptr.To("node-1")
		} else {
			s.Spec.NodeName = ptr.To("node-0")
		}
		return true
	}
	return false
}

// varyOver32Devices adds a pool of 33-40 devices on the node and makes
// the first claim the only one, asking for all of them in one request
// (more than a claim may hold), or for many in two requests, of which the
// second's first alternative would take the claim past 32 devices and its
// second would not. The claim stands alone, without constraints, so that
// no other claim's failure makes upstream try every way of choosing many
// of 40 devices.
func (g *gen) varyOver32Devices(p *problem) bool {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "big-s0"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvGPU, Pool: resourceapi.ResourcePool{Name: "big", Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To("node-0"),
		},
	}
	for di := range 33 + g.n(8) {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("big-%d", di), Attributes: g.attrs(false)})
	}
	p.slices = append(p.slices, s)
	c := p.claims[0]
	p.claims = p.claims[:1]
	c.Spec.Devices.Constraints, c.Spec.Devices.Config = nil, nil
	exact := func(count int) *resourceapi.ExactDeviceRequest {
		return &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(count)}
	}
	if g.chance(0.5) {
		all := exact(0)
		all.DeviceClassName, all.AllocationMode = oneOf(g, "gpu", "any"), resourceapi.DeviceAllocationModeAll
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "all", Exactly: all}}
		return true
	}
	sub := func(name string, count int) resourceapi.DeviceSubRequest {
		return resourceapi.DeviceSubRequest{Name: name, DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(count)}
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{
		{Name: "many", Exactly: exact(10 + g.n(8))},
		{Name: "more", FirstAvailable: []resourceapi.DeviceSubRequest{sub("big", 17+g.n(4)), sub("small", 3+g.n(3))}},
	}
	return true
}

// varyIdentities gives every device a uuid, and often an index, that no
// other device of its pool has, as NVIDIA's GPUs have: the engine's twin
// classes leave such attributes out (twins.go), so that devices alike
// but for them are tried once per position. Selectors and constraints
// then read them: a selector that takes every other index, matchAttribute
// (one device per constraint) and distinctAttribute (always met) on them,
// and on attributes twins share, so that the search backtracks over them.
func (g *gen) varyIdentities(p *problem) bool {
	// Alike but for identity, as the GPUs of one board are.
	for _, sl := range p.slices {
		if len(sl.Spec.Devices) < 2 || !g.chance(0.7) {
			continue
		}
		first := sl.Spec.Devices[0]
		for i := range sl.Spec.Devices[1:] {
			d := &sl.Spec.Devices[i+1]
			d.Attributes = maps.Clone(first.Attributes)
			d.Capacity = maps.Clone(first.Capacity)
			d.Taints = slices.Clone(first.Taints)
		}
	}
	withIndex := g.chance(0.5)
	var index int64 // unique on the node, as NVML's
	for _, d := range g.devices {
		if d.dev.Attributes == nil {
			d.dev.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		}
		d.dev.Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("GPU-%s-%s-%s", d.driver, d.pool, d.dev.Name))}
		if withIndex {
			d.dev.Attributes["index"] = resourceapi.DeviceAttribute{IntValue: ptr.To(index)}
			index++
		}
	}
	if slices.Contains(p.variations, varOver32Devices) {
		// A selector or constraint that fails only after the claim's
		// dozens of devices makes both searches try every combination.
		return true
	}
	for _, r := range requestsOf(p.claims) {
		if withIndex && g.chance(0.3) {
			*r.selectors = append(*r.selectors, celSel(`device.attributes[device.driver].?index.orValue(0) % 2 == 0`))
		}
	}
	for _, c := range p.claims {
		if !g.chance(0.4) {
			continue
		}
		// Identities, and attributes twins share, which make the search
		// go back over twins it tried.
		attr := ptr.To(resourceapi.FullyQualifiedName(oneOf(g, "gpu.example.com/uuid", "gpu.example.com/index", "nic.example.com/uuid",
			"gpu.example.com/model", "gpu.example.com/mem")))
		con := resourceapi.DeviceConstraint{}
		if g.chance(0.5) {
			con.MatchAttribute = attr
		} else {
			con.DistinctAttribute = attr
		}
		c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, con)
	}
	return true
}

// varyTopology gives the GPU driver's devices the attributes of gputopo's
// contract (pkg/contract) that the default policy's link, MIG and
// fragmentation scores read, as NVIDIA's driver publishes them: a type;
// a uuid, or for a partition that consumes counters the parentUUID of the
// GPU that consumes the same counter set; NVLink domains, PCIe switches,
// NUMA nodes, cliques, products and MIG profiles; now and then in the
// driver's full domain or with the wrong type. Requests then select by
// type and constraints match on nvlinkDomain, as users ask for linked
// GPUs. The scores only choose among solutions: the outcome stays
// upstream's.
func (g *gen) varyTopology(p *problem) bool {
	type poolKey struct{ driver, pool string }
	domains := map[poolKey]int{} // per pool: no domain, one, or two
	for _, d := range g.devices {
		if d.driver != drvGPU {
			continue
		}
		k := poolKey{d.driver, d.pool}
		if _, ok := domains[k]; !ok {
			domains[k] = g.n(3)
		}
		if d.dev.Attributes == nil {
			d.dev.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		}
		g.topologyAttributes(d, domains[k])
	}
	if slices.Contains(p.variations, varOver32Devices) {
		// A selector or constraint that fails only after the claim's
		// dozens of devices makes both searches try every combination.
		return true
	}
	for _, r := range requestsOf(p.claims) {
		if g.chance(0.3) {
			*r.selectors = append(*r.selectors, celSel(`device.attributes["gpu.example.com"].?type.orValue("") == "`+oneOf(g, "gpu", "mig")+`"`))
		}
	}
	for _, c := range p.claims {
		if g.chance(0.35) {
			attr := ptr.To(resourceapi.FullyQualifiedName(oneOf(g, "gpu.example.com/nvlinkDomain", "gpu.example.com/parentUUID", "gpu.example.com/cliqueID")))
			c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{MatchAttribute: attr})
		}
	}
	return true
}

// topologyAttributes sets one device's contract attributes; domains is
// how many NVLink domains its pool has (0 to 2).
func (g *gen) topologyAttributes(d genDevice, domains int) {
	a := d.dev.Attributes
	name := func(short string) resourceapi.QualifiedName {
		if g.chance(0.15) {
			return resourceapi.QualifiedName(drvGPU + "/" + short)
		}
		return resourceapi.QualifiedName(short)
	}
	set := func(short string, v resourceapi.DeviceAttribute) { a[name(short)] = v }
	text := func(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(v)} }
	parent := ""
	if len(d.dev.ConsumesCounters) > 0 {
		parent = fmt.Sprintf("GPU-%s-%s", d.pool, d.dev.ConsumesCounters[0].CounterSet)
	}
	switch {
	case parent != "" && g.chance(0.7):
		set("type", text("mig"))
		set("parentUUID", text(parent))
		set("profile", text(oneOf(g, "1g.10gb", "2g.20gb", "4g.40gb")))
	case parent != "":
		set("type", text("gpu")) // the whole GPU, consuming every counter
		set("uuid", text(parent))
	default:
		set("type", text(oneOf(g, "gpu", "gpu", "gpu", "vgpu")))
		set("uuid", text(fmt.Sprintf("GPU-%s-%s-%d", d.pool, d.dev.Name, len(a))))
	}
	if domains > 0 {
		set("nvlinkDomain", text(fmt.Sprintf("%s-nvl%d", d.pool, g.n(domains))))
	}
	switch g.n(4) {
	case 0:
		set("productName", text("NVIDIA H100 80GB HBM3")) // NVSwitch inferred without a domain
	case 1:
		set("productName", text("NVIDIA L4"))
	}
	if g.chance(0.4) {
		set("numaNode", resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.n(2)))})
	}
	if g.chance(0.3) {
		set("pcieSwitch", text(oneOf(g, "sw0", "sw1")))
	}
	if g.chance(0.15) {
		set("cliqueID", text(oneOf(g, "cl.1", "cl.2")))
	}
	if g.chance(0.05) {
		// The wrong type: read as absent, and constraints do not match it.
		set(oneOf(g, "nvlinkDomain", "type", "uuid", "parentUUID"), resourceapi.DeviceAttribute{IntValue: ptr.To(int64(7))})
	}
}

// varyHost counts the node's CPU and memory, as the scheduler plugin does:
// free and asked for, sometimes too little, with future requests excluded
// and contended GPUs. Packing's fragmentation depends on them, and so may
// the devices the default policy prefers; whether the claims can be
// allocated, and first-fit's choice, may not.
func (g *gen) varyHost(p *problem) bool {
	p.host = &HostUse{
		Free:       topology.Host{CPUMilli: int64(g.n(64000)), MemoryMiB: int64(g.n(512 << 10))},
		Pod:        topology.Host{CPUMilli: int64(oneOf(g, 0, 1000, 8000, 48000)), MemoryMiB: int64(oneOf(g, 0, 4096, 65536))},
		Excluded:   oneOf(g, 0, 0.2, 1),
		Contention: oneOf(g, 0, 0.3),
	}
	return true
}
