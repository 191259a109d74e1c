package cliqueplacement

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/topology"
)

// stateKey holds what GeneratePlacements learned for the scorer, in the
// pod group's cycle state.
const stateKey fwk.StateKey = Name

// generated: the free whole GPUs of each proposed placement before the
// group, by placement name.
type generated struct {
	free map[string]int
}

// Clone shares the data: it is written once, before any trial.
func (g *generated) Clone() fwk.StateData { return g }

// GeneratePlacements proposes the cliques a pod group may be tried in.
func (pl *CliquePlacement) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	key, ok := topologyKey(pg)
	if !ok {
		// No constraint: the group may spread, as without this plugin.
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
	}
	logger := klog.FromContext(ctx)
	selected, status := selectedDomain(pg, key)
	if status != nil {
		return nil, status
	}
	scheduled, err := pl.scheduledPods(pg)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	dra, err := pl.draState(ctx)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	gpus := dra.wholeGPUs()
	usable, tainted := pl.untaintedOnly(gpus, pg.GetUnscheduledPods())
	need := pl.groupNeed(pg, len(scheduled))
	caps := pl.localCaps(ctx, need.local, dra)
	domains := groupDomains(logger, parent.Nodes, pg.GetUnscheduledPods(), key, usable, caps, pl.fts.EnableTaintTolerationComparisonOperators)
	pinned, status := pinnedDomain(logger, scheduled, key, gpus, pl.fh.SnapshotSharedLister().NodeInfos().Get)
	if status != nil {
		return nil, status
	}
	claimed, leftovers := pl.claimedDomain(pg.GetUnscheduledPods(), domains)
	cands, status := candidates(domains, key, need, pinned, selected, claimed)
	if status != nil && leftovers {
		// Only the pods' own claims, left allocated by an attempt that
		// did not bind (its binding failed, its leader died), hold the
		// group to a domain without room: try it where it fits. Those
		// claims are unusable there, so PodGroupPostFilter frees them;
		// held where they are, nothing ever would.
		cands, status = candidates(domains, key, need, pinned, selected, "")
	}
	if status != nil {
		return nil, withTaintedLeftOut(status, tainted)
	}
	chosen := cands
	if need.gpus > 0 {
		// Groups without GPUs are tried everywhere, as the in-tree
		// generator tries them: nothing tells which domain fits.
		chosen = pl.bestFit(cands)
	}
	g := &generated{free: make(map[string]int, len(chosen))}
	placements := make([]*fwk.Placement, 0, len(chosen))
	for _, d := range chosen {
		g.free[d.name] = d.free
		placements = append(placements, &fwk.Placement{Name: d.name, Nodes: d.nodes})
	}
	state.Write(stateKey, g)
	if v := logger.V(4); v.Enabled() {
		v.Info("Proposed cliques", "podGroup", klog.KRef(pg.GetNamespace(), pg.GetName()), "key", key, "needGPUs", need.gpus, "needPods", need.pods, "candidates", len(cands), "proposed", names(chosen))
	}
	return &fwk.GeneratePlacementsResult{Placements: placements}, nil
}

// topologyKey is the group's (first, as upstream allows one) topology
// constraint's key.
func topologyKey(pg fwk.PodGroupInfo) (string, bool) {
	if g := pg.GetPodGroup(); g != nil {
		if c := g.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return c.Topology[0].Key, true
		}
	} else if cg := pg.GetCompositePodGroup(); cg != nil {
		if c := cg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return c.Topology[0].Key, true
		}
	}
	return "", false
}

// selectedDomain is the domain the group's pods select with a node
// selector on the key ("" when none does). Pods that select different
// ones can never share a domain: that is the group's error, not a
// shortage.
func selectedDomain(pg fwk.PodGroupInfo, key string) (string, *fwk.Status) {
	var value, by string
	for _, p := range pg.GetUnscheduledPods() {
		v, ok := p.Spec.NodeSelector[key]
		if !ok {
			continue
		}
		if value != "" && v != value {
			return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"pods %s and %s of pod group %s select different %s values (%q, %q) in spec.nodeSelector, and the group must share one",
				by, p.Name, pg.GetName(), key, value, v))
		}
		value, by = v, p.Name
	}
	return value, nil
}

func (pl *CliquePlacement) scheduledPods(pg fwk.PodGroupInfo) ([]*v1.Pod, error) {
	lister := pl.fh.SnapshotSharedLister()
	if pl.fts.EnableCompositePodGroup {
		var out []*v1.Pod
		for s, err := range helper.GetPodGroupStates(lister, fwk.MustParseEntityKey(pg.GetKey())) {
			if err != nil {
				return nil, err
			}
			out = append(out, s.ScheduledPods()...)
		}
		return out, nil
	}
	s, err := lister.PodGroupStates().Get(pg.GetNamespace(), pg.GetName())
	if err != nil {
		return nil, err
	}
	return s.ScheduledPods(), nil
}

// pinnedDomain is the domain the group's scheduled pods run in ("" when
// none runs yet): the rest of the group must join them there. A pod on a
// node that publishes no GPUs now and has no clique label (its node agent
// restarting, its kubelet wiping the slices) says nothing: the others'
// domain pins the group, and with none the group waits for the GPUs.
func pinnedDomain(logger klog.Logger, scheduled []*v1.Pod, key string, gpus map[string]*topology.NodeGPUs, nodeInfo func(string) (fwk.NodeInfo, error)) (string, *fwk.Status) {
	pinned, first, unknown := "", "", ""
	for _, p := range scheduled {
		n, err := nodeInfo(p.Spec.NodeName)
		if err != nil {
			return "", fwk.AsStatus(fmt.Errorf("node of scheduled pod %s: %w", klog.KObj(p), err))
		}
		g := gpus[n.Node().Name]
		d := domainOf(logger, n.Node(), key, g)
		switch {
		case d == "" && key == contract.LabelClique && g == nil:
			unknown = cmp.Or(unknown, fmt.Sprintf("pod %s of the group runs on node %s, which publishes no GPUs now (its node agent may be restarting): its %s domain is unknown until it does", p.Name, p.Spec.NodeName, key))
			continue
		case d == "":
			return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"pod %s of the group runs on node %s, which is in no %s domain", p.Name, p.Spec.NodeName, key))
		case pinned != "" && d != pinned:
			return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"pods %s and %s of the group already run in different %s domains (%s, %s)", first, p.Name, key, pinned, d))
		}
		pinned, first = d, p.Name
	}
	if pinned == "" && unknown != "" {
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, unknown)
	}
	return pinned, nil
}

// claimedDomain is the one domain whose nodes hold the devices of the
// group's claims that are allocated already (a PodGroup's claim that
// outlived its evicted pods): the pods must join those devices there.
// "" when no claim is allocated, or the claims leave more than one
// domain (devices reachable from several), or none. A claim whose
// binding failed or timed out (as GPUTopology in this profile judges it)
// holds the group nowhere: it is freed when a trial of its pod fails
// elsewhere, which a group held to a full clique would never have.
// leftovers reports whether every claim that holds the group there is
// one PodGroupPostFilter frees when its pod cannot use it (reserved for
// nothing or its pod alone, no binding under way).
func (pl *CliquePlacement) claimedDomain(pods []*v1.Pod, domains []*domain) (claimed string, leftovers bool) {
	var common map[string]bool
	users := claimUsers(pods)
	seen := map[string]bool{}
	now := time.Now()
	leftovers = true
	for _, p := range pods {
		for _, name := range claimNames(p) {
			key := p.Namespace + "/" + name
			if seen[key] {
				continue
			}
			seen[key] = true
			c, err := pl.draManager.ResourceClaims().Get(p.Namespace, name)
			if err != nil || c.Status.Allocation == nil || c.Status.Allocation.NodeSelector == nil || gputopology.BindingUnusable(pl.profile, c, now) {
				continue
			}
			sel, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector)
			if err != nil {
				continue
			}
			leftovers = leftovers && leftover(c, users[key])
			here := map[string]bool{}
			for _, d := range domains {
				if slices.ContainsFunc(d.nodes, func(n fwk.NodeInfo) bool { return sel.Match(n.Node()) }) {
					here[d.name] = true
				}
			}
			if common == nil {
				common = here
				continue
			}
			maps.DeleteFunc(common, func(d string, _ bool) bool { return !here[d] })
		}
	}
	if len(common) != 1 {
		return "", false
	}
	for d := range common {
		return d, leftovers
	}
	return "", false
}

// claimUsers are the UIDs of the pods that use each claim, by
// namespace/name.
func claimUsers(pods []*v1.Pod) map[string]map[types.UID]bool {
	out := map[string]map[types.UID]bool{}
	for _, p := range pods {
		for _, name := range claimNames(p) {
			key := p.Namespace + "/" + name
			if out[key] == nil {
				out[key] = map[types.UID]bool{}
			}
			out[key][p.UID] = true
		}
	}
	return out
}

// leftover reports whether PodGroupPostFilter frees the allocated claim
// when the pod it is reserved for cannot use it: reserved for nothing or
// for one of the group's pods that use it alone (GPUTopology's rule, as
// upstream's, for that pod's turn), and no device binding under way,
// which must finish or time out first.
func leftover(c *resourceapi.ResourceClaim, users map[types.UID]bool) bool {
	if !gputopology.FreeableFor(c, func(uid types.UID) bool { return users[uid] }) {
		return false
	}
	_, waiting := topology.BindingStatus(c)
	return len(waiting) == 0
}

// candidates are the domains that can still hold the group: the pinned,
// selected or claimed one if any, with at least need free whole GPUs
// (domains with GPUs the DRA state does not show are kept: their room is
// unknown).
func candidates(domains []*domain, key string, need demand, pinned, selected, claimed string) ([]*domain, *fwk.Status) {
	var out []*domain
	most, mostPlaces, largest := -1, 0, 0
	for _, d := range domains {
		if (pinned != "" && d.name != pinned) || (selected != "" && d.name != selected) || (claimed != "" && d.name != claimed) {
			continue
		}
		most, largest = max(most, d.free), max(largest, d.gpus)
		enough := d.free >= need.gpus
		places := need.places(d)
		if enough {
			mostPlaces = max(mostPlaces, places)
		}
		if enough && places >= need.pods || d.unknownGPUs {
			out = append(out, d)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	// where the group was looked for, and the message when no domain
	// at all is there (missing labels, or the pods' nodeSelector and
	// affinity rule the labelled nodes out).
	var where, none string
	switch {
	case pinned != "":
		where = fmt.Sprintf("in %s %s, where the group's scheduled pods run", key, pinned)
		none = fmt.Sprintf("the pod group's scheduled pods run in %s %s, and no node its other pods may run on is in it", key, pinned)
	case selected != "":
		where = fmt.Sprintf("in %s %s, which its pods select", key, selected)
		none = fmt.Sprintf("the pod group's pods select %s %s, and no node they may run on is in it", key, selected)
	case claimed != "":
		where = fmt.Sprintf("in %s %s, where its allocated claims' devices are", key, claimed)
		none = where
	default:
		where = fmt.Sprintf("in one %s domain", key)
		none = fmt.Sprintf("no node the pod group's pods may run on (by their nodeSelector and affinity) is in a %s domain", key)
	}
	msg := fmt.Sprintf("the pod group needs at least %d free GPUs %s", need.gpus, where)
	switch {
	case most < 0:
		msg = none
	case most >= need.gpus:
		// Enough GPUs, too few on single nodes (trays half used).
		msg += fmt.Sprintf(", %d pods of at least %d on one node each; the most such pods one holds is %d", need.pods, need.smallest, mostPlaces)
		if len(need.local) > 0 {
			msg += fmt.Sprintf(" (counting each node's free devices of %s too)", strings.Join(slices.Sorted(maps.Keys(need.local)), ", "))
		}
	case largest < need.gpus:
		// It will not fit when the fleet empties either.
		msg += fmt.Sprintf("; the most free in one is %d, and the largest holds %d GPUs in all: lower the gang's minCount or drop the topology constraint", most, largest)
	default:
		msg += fmt.Sprintf("; the most free in one is %d", most)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// bestFit orders the candidates by free GPUs, fewest first (a group
// fills a broken clique before it breaks a whole one), those whose room
// is unknown last, and keeps maxPlacements of them; with two or more,
// the emptiest candidate is always among them, in case the estimate of
// the group's need was too low for the others. A domain whose room is
// unknown counts by the free GPUs it is known to have, a lower bound.
func (pl *CliquePlacement) bestFit(cands []*domain) []*domain {
	ordered := slices.Clone(cands)
	slices.SortStableFunc(ordered, func(a, b *domain) int {
		if a.unknownGPUs != b.unknownGPUs {
			if a.unknownGPUs {
				return 1
			}
			return -1
		}
		return a.free - b.free
	})
	limit := int(pl.args.MaxPlacements)
	if len(ordered) <= limit || limit == 1 {
		return ordered[:min(limit, len(ordered))]
	}
	out := slices.Clone(ordered[:limit-1])
	emptiest := ordered[limit-1]
	for _, d := range ordered[limit-1:] {
		if d.free > emptiest.free {
			emptiest = d
		}
	}
	return append(out, emptiest)
}

func names(ds []*domain) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s(%d free)", d.name, d.free)
	}
	return strings.Join(out, ",")
}
