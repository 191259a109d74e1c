package topology

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// NodeGPUs is what one node offers a pod group: its whole GPUs, how many
// of them are free, and the multi-node NVLink clique they belong to.
type NodeGPUs struct {
	GPUs, Free int
	// FreeTainted are the free GPUs (counted in Free) whose device has a
	// NoSchedule or NoExecute taint: only claims that tolerate it may
	// take them.
	FreeTainted int
	// Clique is the cliqueID its GPUs publish; empty when they publish
	// none or disagree.
	Clique string
	// Conflict lists the clique IDs, "" for GPUs that publish none, when
	// the node's GPUs do not all publish the same: a tray that disagrees
	// with itself, or whose fabric holds only some of its GPUs, belongs
	// to no clique (the node agent then removes its clique label too).
	Conflict []string
}

// DeviceTaken reports whether a device is allocated (exclusively or a
// share of it, in the API server or in flight).
type DeviceTaken func(driver, pool, device string) bool

// WholeGPUsByNode counts, per node, the whole GPUs (type gpu) its
// ResourceSlices publish for a claim to take alone, and how many are
// free: neither taken themselves nor through a taken MIG partition of
// the same physical GPU. Shared GPUs (allowMultipleAllocations) are left
// out: the whole-GPU classes select none of them. Only the newest
// generation of each pool counts, as for the allocator; devices without
// a node (network-attached) are not a node's.
func WholeGPUsByNode(slices []*resourceapi.ResourceSlice, taken DeviceTaken) map[string]*NodeGPUs {
	x := IndexGPUs(slices)
	return x.count(func(i int) bool {
		d := x.Devices[i]
		return taken(d.Driver, d.Pool, d.Device)
	}, true)
}

// GPUIndex is what WholeGPUsByNode reads of the slices, read once so
// that a caller with many ledgers and the same slices (the scheduler,
// on every rebuild of its learned workload) counts against it directly:
// describing every device each time was most of the count.
type GPUIndex struct {
	// Devices are the devices of the newest generations, which Count's
	// taken is asked about by index.
	Devices  []DeviceRef
	physical []string // per device, its physical GPU ("" for none)
	whole    []indexedGPU
}

// DeviceRef names a device.
type DeviceRef struct{ Driver, Pool, Device string }

// indexedGPU is a whole GPU of a node: its index in Devices and clique.
type indexedGPU struct {
	node      string
	device    int
	clique    string
	shareable bool // allowMultipleAllocations: a shared GPU
	tainted   bool // NoSchedule or NoExecute on the device
}

// IndexGPUs reads the slices for Count.
func IndexGPUs(slices []*resourceapi.ResourceSlice) *GPUIndex {
	x := &GPUIndex{}
	for _, s := range AllocatableSlices(slices) {
		for di := range s.Spec.Devices {
			d := &s.Spec.Devices[di]
			node := DeviceNode(s, d)
			i := len(x.Devices)
			x.Devices = append(x.Devices, DeviceRef{s.Spec.Driver, s.Spec.Pool.Name, d.Name})
			g := Describe(s.Spec.Driver, node, d.Attributes)
			x.physical = append(x.physical, PhysicalKey(s.Spec.Driver, node, g.Physical))
			if typ, ok := lookup(d.Attributes, s.Spec.Driver, contract.AttrType); node != "" && ok && typ.StringValue != nil && *typ.StringValue == contract.TypeGPU {
				x.whole = append(x.whole, indexedGPU{node: node, device: i, clique: g.Clique, shareable: ptr.Deref(d.AllowMultipleAllocations, false), tainted: anyKeepsClaimsOff(d.Taints)})
			}
		}
	}
	return x
}

// Count is WholeGPUsByNode on the indexed slices with shared GPUs
// counted too; taken reports whether Devices[i] is allocated.
func (x *GPUIndex) Count(taken func(i int) bool) map[string]*NodeGPUs {
	return x.count(taken, false)
}

// count counts the indexed GPUs, shared ones too unless exclusiveOnly.
func (x *GPUIndex) count(taken func(i int) bool, exclusiveOnly bool) map[string]*NodeGPUs {
	isTaken := make([]bool, len(x.Devices))
	takenPhysical := map[string]bool{}
	for i := range x.Devices {
		isTaken[i] = taken(i)
		if isTaken[i] && x.physical[i] != "" {
			takenPhysical[x.physical[i]] = true
		}
	}
	out := map[string]*NodeGPUs{}
	for _, w := range x.whole {
		n := out[w.node]
		first := n == nil
		if first {
			n = &NodeGPUs{}
			out[w.node] = n
		}
		// A shared GPU left out of the counts still says which clique
		// its node is in (a node of shared GPUs only is in one too).
		n.addClique(w.clique, first)
		if exclusiveOnly && w.shareable {
			continue
		}
		n.GPUs++
		if p := x.physical[w.device]; !isTaken[w.device] && (p == "" || !takenPhysical[p]) {
			n.Free++
			if w.tainted {
				n.FreeTainted++
			}
		}
	}
	return out
}

// addClique records the clique of one more of the node's GPUs ("" for a
// GPU in none), the node's first when first.
func (n *NodeGPUs) addClique(id string, first bool) {
	switch {
	case first:
		n.Clique = id
	case len(n.Conflict) > 0:
		if !slices.Contains(n.Conflict, id) {
			n.Conflict = append(n.Conflict, id)
			slices.Sort(n.Conflict)
		}
	case id != n.Clique:
		n.Conflict = []string{n.Clique, id}
		slices.Sort(n.Conflict)
		n.Clique = ""
	}
}

// AllocatableSlices keeps the slices whose devices the allocator may
// hand out: each pool's newest generation, of the pools that generation
// publishes in full (as many slices as their resourceSliceCount, not
// counting those with compatibility groups, which the allocator ignores).
// As upstream, a pool missing a slice (its driver republishing, or a
// slice lost) offers none of its devices, so its GPUs are not free.
func AllocatableSlices(slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	type pool struct{ driver, name string }
	newest := NewestGenerations(slices)
	seen := map[pool]int64{}
	for _, s := range newest {
		if !UsesCompatibilityGroups(s) {
			seen[pool{s.Spec.Driver, s.Spec.Pool.Name}]++
		}
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(newest))
	for _, s := range newest {
		if !UsesCompatibilityGroups(s) && seen[pool{s.Spec.Driver, s.Spec.Pool.Name}] == s.Spec.Pool.ResourceSliceCount {
			out = append(out, s)
		}
	}
	return out
}

// UsesCompatibilityGroups reports whether a device of the slice declares
// compatibility groups (alpha in 1.37). The engine does not implement
// them (it refuses the gate), and with the gate off upstream ignores
// such slices entirely, which leaves their pool incomplete.
func UsesCompatibilityGroups(s *resourceapi.ResourceSlice) bool {
	for i := range s.Spec.Devices {
		for _, cc := range s.Spec.Devices[i].ConsumesCounters {
			if len(cc.CompatibilityGroups) > 0 {
				return true
			}
		}
	}
	return false
}

// NewestGenerations keeps the slices of each pool's newest generation:
// what the fleet's drivers publish now, complete or not.
func NewestGenerations(slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	type pool struct{ driver, name string }
	newest := map[pool]int64{}
	for _, s := range slices {
		p := pool{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[p]; !ok || s.Spec.Pool.Generation > g {
			newest[p] = s.Spec.Pool.Generation
		}
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, s := range slices {
		if s.Spec.Pool.Generation == newest[pool{s.Spec.Driver, s.Spec.Pool.Name}] {
			out = append(out, s)
		}
	}
	return out
}
