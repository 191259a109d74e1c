package sim

import (
	"maps"
	"slices"

	"k8s.io/dynamic-resource-allocation/structured"
)

// consumedValues hands out one map per value of consumed capacity. A
// fleet's shared GPUs hold few distinct sums (the workload's requests
// and their small combinations), and gputopo's plugins read the consumed
// capacity of every device of every node they filter: one map per value
// keeps those reads in the CPU's cache, where one per device missed it
// (half the cost of the solution memo's keys in an openb replay). The
// maps are never changed once handed out, so sharing them is safe.
type consumedValues map[string]structured.ConsumedCapacity

// maxConsumedValues bounds the table; past it, it starts again (maps
// already handed out stay valid).
const maxConsumedValues = 1 << 16

// one returns the map equal to c that it handed out before, or c.
func (v consumedValues) one(c structured.ConsumedCapacity) structured.ConsumedCapacity {
	var key []byte
	for _, name := range slices.Sorted(maps.Keys(c)) {
		key = append(key, name...)
		key = append(key, '=')
		if q := c[name]; q != nil {
			key = append(key, q.String()...)
		}
		key = append(key, ';')
	}
	if have, ok := v[string(key)]; ok {
		return have
	}
	if len(v) >= maxConsumedValues {
		clear(v)
	}
	v[string(key)] = c
	return c
}
