package inspect

import (
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// counterSetKey names one shared counter set of one pool.
type counterSetKey struct{ driver, pool, set string }

// counterUse is, per counter set, what it holds, what the allocated
// devices consume of it and which devices those are.
type counterUse struct {
	capacity map[counterSetKey]map[string]resourceapi.Counter
	consumed map[counterSetKey]map[string]resource.Quantity
	users    map[counterSetKey][]string
}

// countersInUse sums, per counter set of the slices, the counters that
// the devices taken consume (each device once, however many shares of it
// are allocated; admin access takes none), as the allocator does.
func countersInUse(current []*resourceapi.ResourceSlice, uses map[string]deviceUse) counterUse {
	u := counterUse{capacity: map[counterSetKey]map[string]resourceapi.Counter{}, consumed: map[counterSetKey]map[string]resource.Quantity{}, users: map[counterSetKey][]string{}}
	for _, s := range current {
		for _, cs := range s.Spec.SharedCounters {
			u.capacity[counterSetKey{s.Spec.Driver, s.Spec.Pool.Name, cs.Name}] = cs.Counters
		}
	}
	for _, s := range current {
		for _, d := range s.Spec.Devices {
			if uses[DeviceKey(s.Spec.Driver, s.Spec.Pool.Name, d.Name)].taken {
				u.consume(s.Spec.Driver, s.Spec.Pool.Name, d)
			}
		}
	}
	for k := range u.users {
		slices.Sort(u.users[k])
		u.users[k] = slices.Compact(u.users[k])
	}
	return u
}

func (u counterUse) consume(driver, pool string, d resourceapi.Device) {
	for _, cc := range d.ConsumesCounters {
		k := counterSetKey{driver, pool, cc.CounterSet}
		if u.consumed[k] == nil {
			u.consumed[k] = map[string]resource.Quantity{}
		}
		for name, c := range cc.Counters {
			sum := u.consumed[k][name].DeepCopy()
			sum.Add(c.Value)
			u.consumed[k][name] = sum
		}
		u.users[k] = append(u.users[k], d.Name)
	}
}

// blockedBy says why the device's counters no longer fit their sets
// ("counters of gpu-0 in use by gpu-0-mig-3g-0"), "" when they fit. A
// counter or set the pool does not publish never fits (the allocator
// takes no device of such a pool).
func (u counterUse) blockedBy(driver, pool string, d *resourceapi.Device) string {
	for _, cc := range d.ConsumesCounters {
		k := counterSetKey{driver, pool, cc.CounterSet}
		capacity, ok := u.capacity[k]
		if !ok {
			return "counter set " + cc.CounterSet + " not published"
		}
		for _, name := range slices.Sorted(maps.Keys(cc.Counters)) {
			need := u.consumed[k][name].DeepCopy()
			need.Add(cc.Counters[name].Value)
			if have, ok := capacity[name]; !ok || need.Cmp(have.Value) > 0 {
				return u.blockedText(k, name, ok)
			}
		}
	}
	return ""
}

func (u counterUse) blockedText(k counterSetKey, counter string, published bool) string {
	switch {
	case !published:
		return "counter " + counter + " not in set " + k.set
	case len(u.users[k]) == 0:
		return "needs more of counter " + counter + " than set " + k.set + " holds"
	}
	return "counters of " + k.set + " in use by " + strings.Join(u.users[k], ", ")
}
