package sim

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/topology"
)

// links keeps which whole GPUs of a churn fleet are taken, to judge each
// multi-GPU claim's link class against what was free when it arrived.
type links struct {
	gpu   map[string]topology.GPU // pool/device -> GPU
	nodes map[string][]string     // node -> its GPUs' pool/device, in order
	order []string                // nodes in creation order
	used  map[string]bool
	best  map[string]topology.LinkClass // node/n -> best class of the empty node
}

func newLinks() *links {
	return &links{gpu: map[string]topology.GPU{}, nodes: map[string][]string{}, used: map[string]bool{}, best: map[string]topology.LinkClass{}}
}

// add records a node's whole GPUs from its slices.
func (l *links) add(node string, slices []*resourceapi.ResourceSlice) {
	l.order = append(l.order, node)
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			key := s.Spec.Pool.Name + "/" + d.Name
			l.gpu[key] = topology.Describe(s.Spec.Driver, node, d.Attributes)
			l.nodes[node] = append(l.nodes[node], key)
		}
	}
}

// bestOf is the best worst-pair class among every n of the node's GPUs.
func (l *links) bestOf(node string, n int) topology.LinkClass {
	k := fmt.Sprintf("%s/%d", node, n)
	if c, ok := l.best[k]; ok {
		return c
	}
	c := topology.BestSetClass(l.set(l.nodes[node]), n)
	l.best[k] = c
	return c
}

// feasible: some node has n free GPUs at the best class it offers n.
func (l *links) feasible(n int) bool {
	for _, node := range l.order {
		var free []string
		for _, k := range l.nodes[node] {
			if !l.used[k] {
				free = append(free, k)
			}
		}
		if len(free) >= n && topology.BestSetClass(l.set(free), n) <= l.bestOf(node, n) {
			return true
		}
	}
	return false
}

// atBest: the devices are at the best class their node offers so many.
func (l *links) atBest(node string, devices []string) bool {
	return topology.WorstPair(l.set(devices)) <= l.bestOf(node, len(devices))
}

func (l *links) take(devices []string, used bool) {
	for _, d := range devices {
		if _, ok := l.gpu[d]; ok {
			l.used[d] = used
		}
	}
}

func (l *links) set(keys []string) []topology.GPU {
	out := make([]topology.GPU, len(keys))
	for i, k := range keys {
		out[i] = l.gpu[k]
	}
	return out
}
