package allocator

import (
	"cmp"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// pool is one resource pool as seen from one node.
type pool struct {
	driver, name string
	incomplete   bool
	invalid      bool
	// invalidKind is what is wrong, the same words on every node
	// (InvalidPoolError); invalidReason names the slices and devices.
	invalidKind, invalidReason string
	// devices targeting the node, in upstream's order: slices by name
	// (on the stable path, in input order), devices in slice order. first
	// is the index of devices[0] in the node view.
	devices []*device
	first   int
	// others are devices of the pool's generation in slices that do not
	// target the node. They never get allocated here but consume counters.
	others []*device
	// counters: the pool's shared counters, densely indexed.
	counterIndex map[counterKey]int
	counterNames []counterKey
	// counterTotal is each counter's total in the pool's counter unit
	// (amounts.go), scaled approximations when exact is set.
	counterTotal []int64
	// exact holds the amounts as big integers when int64s cannot hold
	// them exactly; nil otherwise.
	exact *exactCounters
	// counterBound: a run with k claims forms no counter sum beyond
	// (k+1) times it (see counterBound); +Inf when exact is set.
	counterBound float64
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

func (inv *Inventory) buildPool(id poolID, targeting, all []*resourceapi.ResourceSlice) *pool {
	p := &pool{driver: id.driver, name: id.pool}
	partitionable := inv.features.PartitionableDevices
	counterSlices, deviceSlices, otherSlices := classifySlices(targeting, all, partitionable, inv.legacy)
	invalid := func(kind, reason string) *pool {
		return &pool{driver: id.driver, name: id.pool, invalid: true, invalidKind: kind, invalidReason: reason}
	}
	if reason := duplicateDeviceName(deviceSlices); reason != "" {
		return invalid("duplicate device name", reason)
	}
	for _, s := range deviceSlices {
		p.devices = append(p.devices, inv.devicesOf(s)...)
	}
	if !partitionable {
		p.markBindingConditions()
		return p
	}
	totals, from, reason := p.indexCounters(counterSlices)
	if reason != "" {
		return invalid("duplicate counter set name", reason)
	}
	if inv.legacy {
		// The stable allocator also checks what devices of counter
		// slices consume, though it never allocates them.
		for _, s := range counterSlices {
			for _, d := range inv.devicesOf(s) {
				if _, _, err := p.resolveConsumption(d); err != nil {
					return invalid(unknownCounter, err.Error())
				}
			}
		}
	}
	for _, s := range otherSlices {
		p.others = append(p.others, inv.devicesOf(s)...)
	}
	if kind, reason := p.resolveConsumptions(totals, from); reason != "" {
		return invalid(kind, reason)
	}
	p.markBindingConditions()
	return p
}

// classifySlices splits a pool's slices: those with shared counters (when
// partitionable devices are on), the other slices that target the node
// (sorted by name, except on the stable path, which keeps input order:
// their devices are the node's), and the pool's other slices elsewhere
// (all minus targeting), whose devices may consume the same counters.
func classifySlices(targeting, all []*resourceapi.ResourceSlice, partitionable, legacy bool) (counterSlices, deviceSlices, otherSlices []*resourceapi.ResourceSlice) {
	if !legacy {
		targeting = slices.Clone(targeting)
		slices.SortFunc(targeting, func(a, b *resourceapi.ResourceSlice) int { return cmp.Compare(a.Name, b.Name) })
	}
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

// indexCounters indexes the pool's shared counters and returns their
// totals and the slice of each, in index order. Any quantity is a valid total, a negative one
// too (API validation accepts it; upstream then allocates no device that
// consumes counters of the pool). It returns why the pool is invalid,
// or "".
func (p *pool) indexCounters(counterSlices []*resourceapi.ResourceSlice) ([]resource.Quantity, []*resourceapi.ResourceSlice, string) {
	p.counterIndex = make(map[counterKey]int)
	setSeen := make(map[string]string)
	var totals []resource.Quantity
	var from []*resourceapi.ResourceSlice
	for _, s := range counterSlices {
		for _, cs := range s.Spec.SharedCounters {
			if prev, dup := setSeen[cs.Name]; dup {
				return nil, nil, fmt.Sprintf("ResourceSlice %s: sharedCounters %s: duplicate counter set name (also in ResourceSlice %s)", s.Name, cs.Name, prev)
			}
			setSeen[cs.Name] = s.Name
			for _, name := range sortedKeys(cs.Counters) {
				k := counterKey{cs.Name, name}
				p.counterIndex[k] = len(p.counterNames)
				p.counterNames = append(p.counterNames, k)
				totals = append(totals, cs.Counters[name].Value)
				from = append(from, s)
			}
		}
	}
	return totals, from, ""
}

// resolveConsumptions resolves what each device of the node (and each of
// the pool's devices elsewhere) consumes of the counters, and converts
// all amounts to the pool's unit. It returns why the pool is invalid
// (InvalidPoolError's kind and the reason naming slices and devices), or
// "".
func (p *pool) resolveConsumptions(totals []resource.Quantity, from []*resourceapi.ResourceSlice) (kind, reason string) {
	resolve := func(devs []*device) ([][]counterUse, [][]resource.Quantity, string) {
		uses := make([][]counterUse, len(devs))
		amounts := make([][]resource.Quantity, len(devs))
		for i, d := range devs {
			u, q, err := p.resolveConsumption(d)
			if err != nil {
				return nil, nil, err.Error()
			}
			uses[i], amounts[i] = u, q
		}
		return uses, amounts, ""
	}
	var usesQ, otherQ [][]resource.Quantity
	if p.uses, usesQ, reason = resolve(p.devices); reason != "" {
		return unknownCounter, reason
	}
	if p.otherUses, otherQ, reason = resolve(p.others); reason != "" {
		return unknownCounter, reason
	}
	if reason := p.setAmounts(totals, from, usesQ, otherQ); reason != "" {
		return "counter amounts too far apart to compute with", reason
	}
	p.buildShapes()
	return "", ""
}

func (p *pool) markBindingConditions() {
	for _, d := range p.devices {
		if d.api.BindingConditions != nil {
			p.hasBindingConditions = true
			return
		}
	}
}

// unknownCounter is the kind of invalid pool where a device consumes a
// counter the pool does not define.
const unknownCounter = "a device consumes a counter the pool does not define"

// resolveConsumption checks that every counter a device consumes exists
// and returns the consumption against the pool's dense counter index,
// with the amounts (any quantity, a negative one too, as upstream adds
// them as they are) in the same order.
func (p *pool) resolveConsumption(d *device) ([]counterUse, []resource.Quantity, error) {
	var uses []counterUse
	var amounts []resource.Quantity
	for _, cc := range d.api.ConsumesCounters {
		found := false
		for _, k := range p.counterNames {
			if k.set == cc.CounterSet {
				found = true
				break
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("ResourceSlice %s: device %s: consumesCounters: counter set %s not found", d.slice.Name, d.api.Name, cc.CounterSet)
		}
		for _, name := range sortedKeys(cc.Counters) {
			idx, ok := p.counterIndex[counterKey{cc.CounterSet, name}]
			if !ok {
				return nil, nil, fmt.Errorf("ResourceSlice %s: device %s: consumesCounters: counter %s not found in counter set %s", d.slice.Name, d.api.Name, name, cc.CounterSet)
			}
			uses = append(uses, counterUse{idx: idx})
			amounts = append(amounts, cc.Counters[name].Value)
		}
	}
	return uses, amounts, nil
}

func (p *pool) usesOf(i int) []counterUse {
	if p.uses == nil {
		return nil
	}
	return p.uses[i]
}
