package gputopology

import (
	"sync"

	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// fleetIndex is an inventory's slices indexed for counting whole GPUs
// (topology.GPUIndex) with each device's ID, built once per inventory:
// the admission pressure counts them on every rebuild of the learned
// workload, and describing every device each time was most of it.
type fleetIndex struct {
	inv  *allocator.Inventory
	gpus *topology.GPUIndex
	ids  []structured.DeviceID
}

// fleetIndexes keeps the index of the newest inventory asked for.
type fleetIndexes struct {
	mu   sync.Mutex
	last *fleetIndex
}

func (f *fleetIndexes) of(inv *allocator.Inventory) *fleetIndex {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last != nil && f.last.inv == inv {
		return f.last
	}
	x := &fleetIndex{inv: inv, gpus: topology.IndexGPUs(inv.Slices())}
	x.ids = make([]structured.DeviceID, len(x.gpus.Devices))
	for i, d := range x.gpus.Devices {
		x.ids[i] = structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
	}
	f.last = x
	return x
}

// count is topology.WholeGPUsByNode on the index and state, with shared
// GPUs counted too: the learned workload's pressure weighs every GPU.
func (x *fleetIndex) count(state *allocator.AllocatedState) map[string]*topology.NodeGPUs {
	taken := takenIDs(state)
	return x.gpus.Count(func(i int) bool { return taken(x.ids[i]) })
}
