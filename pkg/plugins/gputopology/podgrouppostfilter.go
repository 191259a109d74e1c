package gputopology

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.PodGroupPostFilterPlugin = &GPUTopology{}

// PodGroupPostFilter frees claims when a pod group found no placement, as
// the in-tree plugin does: first, for each pod of the group, a claim of
// its own that is allocated where it cannot be used (PostFilter's rule);
// then, if some pod had none and no pod of the group is scheduled yet,
// a claim of the PodGroup (DRAWorkloadResourceClaims) that no node can
// use where it is allocated, or the group's reservation of its claims, so
// that the next attempt allocates them anew. Like upstream it leaves
// composite groups alone, and the claims of the PodGroup of a group with
// topology constraints (with TopologyAwareWorkloadScheduling): their
// placements are chosen per domain (GPUCliquePlacement). Unlike upstream
// it still frees, in such a group, a PodGroup's claim whose binding
// failed or timed out, which no placement can use (upstream's group waits
// until the PodGroup is recreated), and the pods' own claims: one whose
// binding failed or timed out, or written for a pod whose binding then
// failed, is usable on no node, and nothing else would ever free it (no
// per-pod PostFilter runs for a pod of a group), so the group would wait
// forever.
func (pl *GPUTopology) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	pg := pgInfo.GetPodGroup()
	if pgInfo.GetType() == fwk.CompositePodGroupKeyType || pg == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	constrained := pl.fts.EnableTopologyAwareWorkloadScheduling && pg.Spec.SchedulingConstraints != nil
	g, err := readGroup(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if g == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	unreserveGroup := false
	freed := map[types.UID]bool{}
	for _, pod := range pgInfo.GetUnscheduledPods() {
		s := g.pods[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
		if s == nil {
			continue
		}
		found, status := pl.deallocatePodClaims(ctx, pod, s, freed)
		if status.IsError() {
			return nil, status
		}
		unreserveGroup = unreserveGroup || !found
	}
	if pods := pgInfo.GetUnscheduledPods(); unreserveGroup && pl.workloadClaims() && len(pods) > 0 {
		if status := pl.freeGroupClaims(ctx, g, pods[0], freed, constrained); status != nil {
			return nil, status
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, "deallocation and deletion of ResourceClaims completed")
}

// readGroup is the group cycle's state, nil when no pod of it got as far
// as PreFilter.
func readGroup(state fwk.PodGroupCycleState) (*groupState, error) {
	v, err := state.Read(stateKey)
	if err != nil {
		return nil, nil
	}
	g, ok := v.(*groupState)
	if !ok {
		return nil, fmt.Errorf("%s pod-group state has type %T, want *groupState", Name, v)
	}
	return g, nil
}

// freeGroupClaims deallocates one claim that no node can use where it is
// allocated and that nothing or only the PodGroup holds, else removes
// the PodGroup's reservation from one of its claims; only while no pod of
// the group is assumed or bound (they would be using the claims). Claims
// in freed were deallocated already in this call, from the same read.
// For a group with a topology constraint (constrained) it leaves alone,
// as upstream does, claims that some domain's placement may still use,
// and the reservations: it frees only a claim whose binding failed or
// timed out, which no placement can use.
func (pl *GPUTopology) freeGroupClaims(ctx context.Context, g *groupState, pod *v1.Pod, freed map[types.UID]bool, constrained bool) *fwk.Status {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	groupName := *pod.Spec.SchedulingGroup.PodGroupName
	pgState, err := pl.fh.PodGroupManager().PodGroupStates().Get(pod.Namespace, groupName)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("state of PodGroup %s/%s: %w", pod.Namespace, groupName, err))
	}
	if pgState.ScheduledPodsCount() > 0 {
		return nil
	}
	pg, err := pl.podGroupOf(pod)
	if err != nil || pg == nil {
		return fwk.AsStatus(err)
	}
	claims := pl.clientset.ResourceV1().ResourceClaims(pod.Namespace)
	now := time.Now()
	for _, s := range g.pods {
		for _, i := range s.unavailableClaims() {
			claim := s.claims[i]
			if claim.Status.Allocation == nil || freed[claim.UID] || !FreeableFor(claim, func(uid types.UID) bool { return uid == pg.UID }) {
				continue
			}
			if constrained && pl.bindingRule().unusable(claim, now) == nil {
				continue
			}
			logger.V(4).Info("Deallocating claim of the pod group", "podGroup", klog.KObj(pg), "claim", klog.KObj(claim))
			if err := pl.deallocate(ctx, claim); err != nil {
				return fwk.AsStatus(err)
			}
			return fwk.NewStatus(fwk.Unschedulable, "deallocation of PodGroup ResourceClaim completed")
		}
	}
	if constrained {
		return nil
	}
	for i := range pg.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.NameFromPodGroup(pg, &pg.Spec.ResourceClaims[i])
		if err != nil {
			return fwk.AsStatus(err)
		}
		if name == nil {
			continue
		}
		claim, err := pl.draManager.ResourceClaims().Get(pg.Namespace, *name)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if mustCheckOwner && resourceclaim.IsForPodGroup(pg, claim) != nil {
			continue
		}
		if claim.Status.Allocation == nil || !pl.reservedFor(pod, claim) {
			continue
		}
		patch := fmt.Sprintf(`{"metadata": {"uid": %q}, "status": {"reservedFor": [{"$patch": "delete", "uid": %q}]}}`, claim.UID, pg.UID)
		if _, err := claims.Patch(ctx, claim.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			logger.Error(err, "Removing the pod group's reservation failed", "podGroup", klog.KObj(pg), "claim", klog.KObj(claim))
			continue
		}
		return fwk.NewStatus(fwk.Unschedulable, "ResourceClaim unreserved for PodGroup")
	}
	return nil
}
