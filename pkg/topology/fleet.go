package topology

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gputopo/gputopo/pkg/contract"
)

// DeviceUse is what is allocated of one device, in the API server or in
// flight.
type DeviceUse struct {
	// Exclusive: the device itself is allocated (not a share of it).
	Exclusive bool
	// Shared: shares of the device are allocated (a device with
	// allowMultipleAllocations).
	Shared bool
	// Consumed is the capacity the device's shares consume together;
	// nil when none.
	Consumed map[resourceapi.QualifiedName]*resource.Quantity
}

// DeviceUsage reports what is allocated of a device.
type DeviceUsage func(driver, pool, device string) DeviceUse

// FleetSummary is the state of a fleet's GPUs at one moment, for
// operators (the scheduler's gputopo_fleet_* gauges). Every count is over
// the devices of the newest generation of each pool, in slices with a
// node (as WholeGPUsByNode). Taints do not change a GPU's state: a free
// GPU that only tolerating claims may take is free, and counted again in
// Tainted.
type FleetSummary struct {
	// GPUs are the whole GPUs (type gpu): Free + Partial + Used.
	GPUs int
	// Free GPUs have nothing allocated: not themselves, not a share of
	// them, not a MIG partition of them.
	Free int
	// Partial GPUs have MIG partitions or shares allocated and room for
	// more: some unallocated partition of theirs still fits their
	// counters, or none of their capacities is fully consumed by shares.
	Partial int
	// Used GPUs take no more: allocated whole, or their allocated
	// partitions leave no other partition room (a 7g.80gb, two 3g.40gb),
	// or their shares consume all of one of their capacities.
	Used int

	// Tainted counts, per state ("free", "partial", "used"), the GPUs
	// whose own device carries a NoSchedule or NoExecute taint (the node
	// agent's health taint, another driver's, or a DeviceTaintRule's when
	// the slices come with those applied): only claims that tolerate it
	// may take them. A state with none is absent.
	Tainted map[string]int

	// Stranded are free GPUs whose group is not wholly free, so that a
	// job wanting the whole group cannot have them. A GPU's group is its
	// NVLink domain on its node (published nvlinkDomain, or the node's
	// NVSwitch fabric inferred from the product); GPUs in no NVLink
	// domain form one group per node. Free = Stranded + the GPUs of
	// wholly free groups.
	Stranded int

	// NVLinkDomains counts the NVLink domains (node, domain); FreeNVLinkDomains
	// those whose GPUs are all free. Groups of GPUs in no NVLink domain
	// are not counted here.
	NVLinkDomains, FreeNVLinkDomains int

	// Cliques counts the multi-node NVLink cliques (cliqueID, a GB200
	// NVL72 rack); FreeCliques those whose GPUs are all free. A node
	// belongs to the clique its GPUs publish, to none when they disagree,
	// and to its clique label when they publish none (as for
	// GPUCliquePlacement, WholeGPUsByNode, which leaves shared GPUs out
	// of its counts, not these).
	Cliques, FreeCliques int

	// MIGPlaceable is, per MIG profile (the partitions' profile
	// attribute), how many more instances of that profile alone could be
	// allocated now: its unallocated partitions are taken greedily in
	// published order, each when its counters still fit what the
	// allocated devices and the instances taken before consume. The
	// counts of different profiles overlap (they compete for the same
	// slices) and must not be added. With the real MIG placements,
	// whose partitions of one profile never overlap, greedy is the
	// maximum. Profiles with no room left are present with 0.
	MIGPlaceable map[string]int
}

// The states of a whole GPU in a FleetSummary, as the gauges label them.
const (
	StateFree    = "free"
	StatePartial = "partial"
	StateUsed    = "used"
)

// GPUStates are the states, in the order the gauges and reports list them.
var GPUStates = []string{StateFree, StatePartial, StateUsed}

// fleetGPU is one whole GPU while the summary is built.
type fleetGPU struct {
	node, domain, clique string
	whole                bool // a whole-GPU device was seen (else only partitions)
	// partitionsUseCounters: some partition of it consumes counters. Without
	// its whole device, that is gputopo's agent withholding a GPU in part
	// (instances it did not make hold some slices), not a GPU published
	// as its partitions alone, and it is not counted.
	partitionsUseCounters bool
	busy                  bool // something allocated on it
	full                  bool // allocated whole, or shares exhausted a capacity
	room                  bool // an unallocated device of it still fits its counters
	partitionsTaken       bool
	tainted               bool // NoSchedule or NoExecute on the GPU's device
}

// fleetCandidate is an unallocated device that may still be allocated:
// a MIG partition, or a whole GPU that consumes counters.
type fleetCandidate struct {
	dev     *resourceapi.Device
	sets    []*counterSet // per ConsumesCounters entry; nil: not published
	gpu     *fleetGPU     // nil: not tied to a known GPU
	profile string        // MIG partitions only
}

// SummarizeFleet computes the fleet's summary from its ResourceSlices and
// what is allocated. A node's clique is its GPUs' cliqueID, or where they
// publish none, as NVIDIA's DRA driver does, its label in nodeCliques
// (node name to contract.LabelClique; nil: none), as GPUCliquePlacement
// reads it. It costs O(devices × counters each consumes) and allocates
// per GPU and per counter, never per pair.
func SummarizeFleet(slices []*resourceapi.ResourceSlice, usage DeviceUsage, nodeCliques map[string]string) FleetSummary {
	current := AllocatableSlices(slices)

	// Counters: what each set holds and what allocated devices consume.
	sets := NewCounterSets(current)
	devices := 0
	for _, s := range current {
		devices += len(s.Spec.Devices)
	}
	sum := FleetSummary{MIGPlaceable: map[string]int{}, Tainted: map[string]int{}}
	gpus := make(map[string]*fleetGPU, devices)
	gpuOf := func(physical string) *fleetGPU {
		g := gpus[physical]
		if g == nil {
			g = &fleetGPU{}
			gpus[physical] = g
		}
		return g
	}
	var free []fleetCandidate // unallocated partitions, and GPUs that consume counters
	for _, s := range current {
		driver, pool := s.Spec.Driver, s.Spec.Pool.Name
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			node := DeviceNode(s, d)
			if node == "" {
				continue
			}
			typ := ""
			if a, ok := lookup(d.Attributes, driver, contract.AttrType); ok && a.StringValue != nil {
				typ = *a.StringValue
			}
			if typ != contract.TypeGPU && typ != contract.TypeMIG {
				continue
			}
			desc := Describe(driver, node, d.Attributes)
			physical := PhysicalKey(driver, node, desc.Physical)
			if physical == "" && typ == contract.TypeGPU {
				physical = driver + "/" + pool + "/device:" + d.Name
			}
			var g *fleetGPU
			if physical != "" {
				g = gpuOf(physical)
			}
			use := usage(driver, pool, d.Name)
			taken := use.Exclusive || use.Shared
			if taken {
				sets.Consume(driver, pool, d)
			}
			switch typ {
			case contract.TypeGPU:
				g.whole = true
				g.node, g.domain, g.clique = node, desc.NVLinkDomain, desc.Clique
				g.tainted = anyKeepsClaimsOff(d.Taints)
				if taken {
					g.busy = true
					g.full = g.full || use.Exclusive || capacityExhausted(d, use.Consumed)
				}
			case contract.TypeMIG:
				if g != nil && !g.whole {
					// A GPU published as its partitions alone (NVIDIA's
					// driver, MIG mode without DynamicMIG) counts too.
					g.node, g.domain, g.clique = node, desc.NVLinkDomain, desc.Clique
				}
				if g != nil && len(d.ConsumesCounters) > 0 {
					g.partitionsUseCounters = true
				}
				if taken && g != nil {
					g.busy, g.partitionsTaken = true, true
				}
			}
			profile := ""
			if typ == contract.TypeMIG {
				if a, ok := lookup(d.Attributes, driver, contract.AttrProfile); ok && a.StringValue != nil {
					profile = *a.StringValue
					if _, ok := sum.MIGPlaceable[profile]; !ok {
						sum.MIGPlaceable[profile] = 0 // present even when none is left
					}
				}
			}
			if !taken && (typ == contract.TypeMIG || len(d.ConsumesCounters) > 0) {
				c := fleetCandidate{dev: d, gpu: g, profile: profile, sets: make([]*counterSet, len(d.ConsumesCounters))}
				for i, cc := range d.ConsumesCounters {
					c.sets[i] = sets.of(driver, pool, cc.CounterSet)
				}
				free = append(free, c)
			}
		}
	}

	// Which unallocated devices still fit, and greedy instances per
	// profile on top of what is allocated.
	for _, c := range free {
		if c.gpu != nil && c.fits("") {
			c.gpu.room = true
		}
		if c.profile != "" && c.fits(c.profile) {
			sum.MIGPlaceable[c.profile]++
			c.take(c.profile)
		}
	}

	type groupKey struct{ node, domain string }
	type count struct{ gpus, free int }
	groups := map[groupKey]*count{}
	nodes := map[string]*NodeGPUs{}
	for _, g := range gpus {
		if !g.whole && g.partitionsUseCounters {
			continue // withheld in part by the agent
		}
		sum.GPUs++
		isFree := !g.busy
		state := StatePartial
		switch {
		case isFree:
			sum.Free++
			state = StateFree
		case g.full || (g.partitionsTaken && !g.room):
			sum.Used++
			state = StateUsed
		default:
			sum.Partial++
		}
		if g.tainted {
			sum.Tainted[state]++
		}
		k := groupKey{g.node, g.domain}
		gc := groups[k]
		if gc == nil {
			gc = &count{}
			groups[k] = gc
		}
		n := nodes[g.node]
		if n == nil {
			n = &NodeGPUs{}
			nodes[g.node] = n
		}
		gc.gpus++
		n.GPUs++
		if isFree {
			gc.free++
			n.Free++
		}
		n.addClique(g.clique, n.GPUs == 1)
	}
	for k, gc := range groups {
		if gc.free < gc.gpus {
			sum.Stranded += gc.free
		}
		if k.domain != "" {
			sum.NVLinkDomains++
			if gc.free == gc.gpus {
				sum.FreeNVLinkDomains++
			}
		}
	}
	cliqueFree := map[string]bool{}
	for name, n := range nodes {
		clique := n.Clique
		if clique == "" && len(n.Conflict) == 0 {
			clique = nodeCliques[name]
		}
		if clique == "" {
			continue
		}
		f, seen := cliqueFree[clique]
		cliqueFree[clique] = (f || !seen) && n.Free == n.GPUs
	}
	sum.Cliques = len(cliqueFree)
	for _, f := range cliqueFree {
		if f {
			sum.FreeCliques++
		}
	}
	return sum
}

// anyKeepsClaimsOff reports whether one of the taints keeps claims off
// (SummarizeFleet's slices parameter hides the slices package there).
func anyKeepsClaimsOff(taints []resourceapi.DeviceTaint) bool {
	return slices.ContainsFunc(taints, KeepsClaimsOff)
}

// fits reports whether the device's counters fit what their sets hold
// less what is consumed and, with a profile, what its instances counted
// so far take. A counter set its pool does not publish never fits, as for
// the allocator; a device that consumes no counters always fits.
func (c fleetCandidate) fits(profile string) bool {
	for i, cc := range c.dev.ConsumesCounters {
		set := c.sets[i]
		if set == nil {
			return false
		}
		extra := set.extra[profile] // nil without profile
		for name, q := range cc.Counters {
			if _, fits := set.fits(name, q.Value, extra); !fits {
				return false
			}
		}
	}
	return true
}

// take counts the device as one more instance of profile.
func (c fleetCandidate) take(profile string) {
	for i, cc := range c.dev.ConsumesCounters {
		set := c.sets[i]
		if set.extra == nil {
			set.extra = map[string]map[string]resource.Quantity{}
		}
		e := set.extra[profile]
		if e == nil {
			e = map[string]resource.Quantity{}
			set.extra[profile] = e
		}
		for name, q := range cc.Counters {
			add(e, name, q.Value)
		}
	}
}

// capacityExhausted reports whether shares consume all of one of the
// device's capacities.
func capacityExhausted(d *resourceapi.Device, consumed map[resourceapi.QualifiedName]*resource.Quantity) bool {
	for name, c := range d.Capacity {
		if q := consumed[name]; q != nil && !c.Value.IsZero() && q.Cmp(c.Value) >= 0 {
			return true
		}
	}
	return false
}
