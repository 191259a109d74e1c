package topology

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/contract"
)

// PartitionShare reads back what the node agent publishes: the share of its
// GPU that a device takes, the memory slices it consumes over those of its
// GPU's counter set (sets: the pool's counter sets by name). A device
// without memory-slice counters (a whole GPU outside MIG mode) takes 1.
func PartitionShare(d *resourceapi.Device, sets map[string]resourceapi.CounterSet) float64 {
	used, total := 0, 0
	for _, c := range d.ConsumesCounters {
		for name := range c.Counters {
			if contract.IsMemorySliceCounter(name) {
				used++
			}
		}
		for name := range sets[c.CounterSet].Counters {
			if contract.IsMemorySliceCounter(name) {
				total++
			}
		}
	}
	if used == 0 || total == 0 {
		return 1
	}
	return float64(used) / float64(total)
}
