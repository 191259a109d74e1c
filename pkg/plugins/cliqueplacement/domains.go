package cliqueplacement

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	corev1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/topology"
)

// domain is one candidate placement: the nodes of one clique (or one
// value of another topology label) and their whole GPUs.
type domain struct {
	name        string
	nodes       []fwk.NodeInfo
	gpus        int
	free        int
	nodeFree    []int // free whole GPUs per schedulable node
	nodeCap     []int // per schedulable node, the group's pods its other devices allow (none: no limit)
	unknownGPUs bool  // some node publishes no GPUs in DRA (device plugin)
}

// draState is the slices and what is taken of their devices, read once
// per group from the scheduler's shared DRA state (allocated and
// in-flight claims).
type draState struct {
	slices []*resourceapi.ResourceSlice
	taken  topology.DeviceTaken
}

func (pl *CliquePlacement) draState(ctx context.Context) (*draState, error) {
	slices, err := pl.draManager.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	state, err := gputopology.GatherAllocatedState(ctx, pl.draManager, pl.fts.EnableDRAConsumableCapacity)
	if err != nil {
		return nil, err
	}
	return &draState{slices: slices, taken: gputopology.TakenIn(state)}, nil
}

// wholeGPUs are every node's whole GPUs, free ones and clique.
func (s *draState) wholeGPUs() map[string]*topology.NodeGPUs {
	return topology.WholeGPUsByNode(s.slices, s.taken)
}

// domainOf is the node's value for the group's topology key. For the
// clique label the GPUs' cliqueID wins over the label (the label is the
// fallback for drivers that publish no attribute); a node whose GPUs
// disagree belongs to no clique.
func domainOf(logger klog.Logger, node *v1.Node, key string, gpus *topology.NodeGPUs) string {
	if key == contract.LabelClique && gpus != nil {
		if len(gpus.Conflict) > 0 {
			logger.V(4).Info("Node's GPUs publish different cliques, the node is in none", "node", klog.KObj(node), "cliques", gpus.Conflict)
			return ""
		}
		if gpus.Clique != "" {
			return gpus.Clique
		}
	}
	return node.Labels[key]
}

// groupDomains groups the nodes that some of the group's pods may run
// on (their nodeSelector and required node affinity) by domain, in a
// stable order: a clique the pods cannot use is not proposed, and its
// free GPUs do not count.
func groupDomains(logger klog.Logger, nodes []fwk.NodeInfo, pods []*v1.Pod, key string, gpus map[string]*topology.NodeGPUs, caps map[string]int, comparisonOperators bool) []*domain {
	affinities := requiredAffinities(pods)
	byName := map[string]*domain{}
	var out []*domain
	for _, n := range nodes {
		node := n.Node()
		if !anyMatches(affinities, node) {
			continue
		}
		g := gpus[node.Name]
		name := domainOf(logger, node, key, g)
		if name == "" {
			continue
		}
		d := byName[name]
		if d == nil {
			d = &domain{name: name}
			byName[name] = d
			out = append(out, d)
		}
		d.nodes = append(d.nodes, n)
		if g == nil {
			// A node with no extended resource (a CPU node, a system
			// node) has no GPUs to count; one with some may have them
			// through a device plugin.
			d.unknownGPUs = d.unknownGPUs || hasExtendedResources(node)
			continue
		}
		d.gpus += g.GPUs
		if tolerated(logger, pods, node, comparisonOperators) {
			// The free GPUs of a node the pods may not land on (cordoned,
			// or tainted, say for maintenance or bad health) take none
			// of them: such a rack is not the emptiest clique.
			d.free += g.Free
			d.nodeFree = append(d.nodeFree, g.Free)
			if caps != nil {
				d.nodeCap = append(d.nodeCap, caps[node.Name])
			}
		}
	}
	slices.SortFunc(out, func(a, b *domain) int { return cmp.Compare(a.name, b.name) })
	return out
}

// hasExtendedResources: the node advertises an extended resource (a
// device plugin's, such as nvidia.com/gpu).
func hasExtendedResources(node *v1.Node) bool {
	for name, q := range node.Status.Allocatable {
		if corev1helper.IsExtendedResourceName(name) && !q.IsZero() {
			return true
		}
	}
	return false
}

// tolerated: some of the pods tolerates the node's NoSchedule and
// NoExecute taints, and its cordon, as the TaintToleration and
// NodeUnschedulable filters judge them (a burn-in group that tolerates
// the cordon may use a drained rack).
func tolerated(logger klog.Logger, pods []*v1.Pod, node *v1.Node, comparisonOperators bool) bool {
	taints := node.Spec.Taints
	if node.Spec.Unschedulable {
		taints = append(slices.Clone(taints), v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	}
	if len(taints) == 0 || len(pods) == 0 {
		return true
	}
	for _, p := range pods {
		if _, untolerated := v1helper.FindMatchingUntoleratedTaint(logger, taints, p.Spec.Tolerations, helper.DoNotScheduleTaintsFilterFunc(), comparisonOperators); !untolerated {
			return true
		}
	}
	return false
}

// requiredAffinities are the pods' required node affinities.
func requiredAffinities(pods []*v1.Pod) []nodeaffinity.RequiredNodeAffinity {
	out := make([]nodeaffinity.RequiredNodeAffinity, len(pods))
	for i, p := range pods {
		out[i] = nodeaffinity.GetRequiredNodeAffinity(p)
	}
	return out
}

func anyMatches(affinities []nodeaffinity.RequiredNodeAffinity, node *v1.Node) bool {
	if len(affinities) == 0 {
		return true
	}
	for _, a := range affinities {
		if ok, _ := a.Match(node); ok {
			return true
		}
	}
	return false
}
