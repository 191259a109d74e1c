package inspect

import (
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/topology"
)

// counterSetKey names one shared counter set of one pool.
type counterSetKey struct{ driver, pool, set string }

// counterUse is what the counter sets hold and what the allocated devices
// consume of them (topology.CounterSets), and per set which devices
// those are.
type counterUse struct {
	sets  topology.CounterSets
	users map[counterSetKey][]string
}

// countersInUse sums, per counter set of the slices, the counters that
// the devices taken consume (each device once, however many shares of it
// are allocated; admin access takes none), as the allocator does.
func countersInUse(current []*resourceapi.ResourceSlice, uses map[string]deviceUse) counterUse {
	u := counterUse{sets: topology.NewCounterSets(current), users: map[counterSetKey][]string{}}
	for _, s := range current {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if !uses[DeviceKey(s.Spec.Driver, s.Spec.Pool.Name, d.Name)].taken {
				continue
			}
			u.sets.Consume(s.Spec.Driver, s.Spec.Pool.Name, d)
			for _, cc := range d.ConsumesCounters {
				k := counterSetKey{s.Spec.Driver, s.Spec.Pool.Name, cc.CounterSet}
				u.users[k] = append(u.users[k], d.Name)
			}
		}
	}
	for k := range u.users {
		slices.Sort(u.users[k])
		u.users[k] = slices.Compact(u.users[k])
	}
	return u
}

// blockedBy says why the device's counters no longer fit their sets
// ("counters of gpu-0 in use by gpu-0-mig-3g-0"), "" when they fit. A
// counter or set the pool does not publish never fits (the allocator
// takes no device of such a pool).
func (u counterUse) blockedBy(driver, pool string, d *resourceapi.Device) string {
	set, counter, published, found := u.sets.Misfit(driver, pool, d)
	switch {
	case !found:
		return ""
	case counter == "":
		return "counter set " + set + " not published"
	case !published:
		return "counter " + counter + " not in set " + set
	}
	if users := u.users[counterSetKey{driver, pool, set}]; len(users) > 0 {
		return "counters of " + set + " in use by " + strings.Join(users, ", ")
	}
	return "needs more of counter " + counter + " than set " + set + " holds"
}
