package topology

import (
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CounterSets is what the shared counter sets of some slices hold and
// what the devices taken so far consume of them, as the allocator counts
// them: a device's counters count once however many shares of it are
// allocated, and admin access takes none (the caller decides what is
// taken).
type CounterSets struct{ sets map[setKey]*counterSet }

// setKey names one counter set of one pool.
type setKey struct {
	driver, pool, set string
}

// counterSet is what one counter set holds and what is consumed of it,
// summed exactly (resource.Quantity): MilliValue would wrap a counter
// past int64's milli-units (10P) to nothing, floats miss 100m + 200m.
type counterSet struct {
	capacity, consumed map[string]resource.Quantity
	// extra: per MIG profile, what the instances counted so far take
	// (SummarizeFleet's estimate of what still fits).
	extra map[string]map[string]resource.Quantity
}

// NewCounterSets reads the counter sets the slices publish, none used.
func NewCounterSets(slices []*resourceapi.ResourceSlice) CounterSets {
	c := CounterSets{sets: map[setKey]*counterSet{}}
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			set := &counterSet{capacity: make(map[string]resource.Quantity, len(cs.Counters)), consumed: map[string]resource.Quantity{}}
			for name, v := range cs.Counters {
				set.capacity[name] = v.Value
			}
			c.sets[setKey{s.Spec.Driver, s.Spec.Pool.Name, cs.Name}] = set
		}
	}
	return c
}

// of is the set a device of the pool names; nil when the pool does not
// publish it.
func (c CounterSets) of(driver, pool, set string) *counterSet {
	return c.sets[setKey{driver, pool, set}]
}

// Consume counts what a taken device of the pool consumes; counters of
// sets the pool does not publish are not counted.
func (c CounterSets) Consume(driver, pool string, d *resourceapi.Device) {
	for _, cc := range d.ConsumesCounters {
		if set := c.of(driver, pool, cc.CounterSet); set != nil {
			for name, q := range cc.Counters {
				add(set.consumed, name, q.Value)
			}
		}
	}
}

// Misfit finds, in a stable order, the first of the device's counters
// that no longer fits its set: the set, the counter ("" when the pool
// does not publish the set) and whether the set has that counter. found
// is false when every counter fits. A set or counter the pool does not
// publish never fits, as for the allocator.
func (c CounterSets) Misfit(driver, pool string, d *resourceapi.Device) (set, counter string, published, found bool) {
	for _, cc := range d.ConsumesCounters {
		s := c.of(driver, pool, cc.CounterSet)
		if s == nil {
			return cc.CounterSet, "", false, true
		}
		for _, name := range slices.Sorted(maps.Keys(cc.Counters)) {
			if has, fits := s.fits(name, cc.Counters[name].Value, nil); !fits {
				return cc.CounterSet, name, has, true
			}
		}
	}
	return "", "", false, false
}

// fits reports whether q more of the counter fits what the set holds
// less what is consumed and extra; has is whether the set has the
// counter at all.
func (s *counterSet) fits(name string, q resource.Quantity, extra map[string]resource.Quantity) (has, fits bool) {
	have, ok := s.capacity[name]
	if !ok {
		return false, false
	}
	need := s.consumed[name].DeepCopy() // Add changes a Quantity's shared decimal
	need.Add(extra[name])
	need.Add(q)
	return true, need.Cmp(have) <= 0
}

// add adds q to m[name], whose sums only add ever writes.
func add(m map[string]resource.Quantity, name string, q resource.Quantity) {
	sum := m[name].DeepCopy()
	sum.Add(q)
	m[name] = sum
}
