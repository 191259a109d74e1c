package topology

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/contract"
)

// NodeGPUs is what one node offers a pod group: its whole GPUs, how many
// of them are free, and the multi-node NVLink clique they belong to.
type NodeGPUs struct {
	GPUs, Free int
	// Clique is the cliqueID its GPUs publish; empty when they publish
	// none or disagree.
	Clique string
	// Conflict lists the clique IDs when the node's GPUs publish more
	// than one: a tray that disagrees with itself belongs to no clique.
	Conflict []string
}

// DeviceTaken reports whether a device is allocated (exclusively or a
// share of it, in the API server or in flight).
type DeviceTaken func(driver, pool, device string) bool

// WholeGPUsByNode counts, per node, the whole GPUs (type gpu) its
// ResourceSlices publish and how many are free: neither taken themselves
// nor through a taken MIG partition of the same physical GPU. Only the
// newest generation of each pool counts, as for the allocator; slices
// without a node (network-attached devices) are not a node's.
func WholeGPUsByNode(slices []*resourceapi.ResourceSlice, taken DeviceTaken) map[string]*NodeGPUs {
	current := newestGenerations(slices)
	takenPhysical := map[string]bool{}
	for _, s := range current {
		for _, d := range s.Spec.Devices {
			if taken(s.Spec.Driver, s.Spec.Pool.Name, d.Name) {
				if g := Describe(s.Spec.Driver, "", d.Attributes); g.Physical != "" {
					takenPhysical[g.Physical] = true
				}
			}
		}
	}
	out := map[string]*NodeGPUs{}
	for _, s := range current {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			continue
		}
		node := *s.Spec.NodeName
		for _, d := range s.Spec.Devices {
			if typ, ok := lookup(d.Attributes, s.Spec.Driver, contract.AttrType); !ok || typ.StringValue == nil || *typ.StringValue != contract.TypeGPU {
				continue
			}
			n := out[node]
			if n == nil {
				n = &NodeGPUs{}
				out[node] = n
			}
			g := Describe(s.Spec.Driver, node, d.Attributes)
			n.GPUs++
			if !taken(s.Spec.Driver, s.Spec.Pool.Name, d.Name) && (g.Physical == "" || !takenPhysical[g.Physical]) {
				n.Free++
			}
			n.addClique(g.Clique)
		}
	}
	return out
}

func (n *NodeGPUs) addClique(id string) {
	if id == "" || slices.Contains(n.Conflict, id) {
		return
	}
	switch {
	case n.Clique == "" && len(n.Conflict) == 0:
		n.Clique = id
	case n.Clique == id:
	default:
		if n.Clique != "" {
			n.Conflict = append(n.Conflict, n.Clique)
			n.Clique = ""
		}
		n.Conflict = append(n.Conflict, id)
		slices.Sort(n.Conflict)
	}
}

// newestGenerations keeps the slices of each pool's newest generation.
func newestGenerations(slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
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
