package gputopology

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// Claims of a PodGroup (KEP-5729, the DRAWorkloadResourceClaims gate): a
// pod's resourceClaims entry equal to an entry of its PodGroup's
// spec.resourceClaims names a claim that the group owns (made from a
// template by the resourceclaim controller) or that it was given. Such a
// claim is allocated once and reserved for the PodGroup, not for each
// pod; the in-tree plugin does the same, and with the gate off it treats
// the entry as the pod's own.

// workloadClaims: the scheduler runs with DRAWorkloadResourceClaims.
func (pl *GPUTopology) workloadClaims() bool { return pl.fts.EnableDRAWorkloadResourceClaims }

// podGroupOf is the pod's PodGroup from the scheduling snapshot, nil when
// the gate is off or the pod is in no group.
func (pl *GPUTopology) podGroupOf(pod *v1.Pod) (*schedulingapi.PodGroup, error) {
	if !pl.workloadClaims() || pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil, nil
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	pg, err := pl.fh.SnapshotSharedLister().PodGroups().Get(pod.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("pod.spec.schedulingGroup.podGroupName: PodGroup %s/%s: %w", pod.Namespace, name, err)
	}
	return pg, nil
}

// claimBindings is, per claim, the reservedFor entry PreBind writes: the
// PodGroup for a claim of the group's spec.resourceClaims, else the pod.
func (pl *GPUTopology) claimBindings(pod *v1.Pod, claims []*resourceapi.ResourceClaim) ([]resourceapi.ResourceClaimConsumerReference, error) {
	pg, err := pl.podGroupOf(pod)
	if err != nil {
		return nil, err
	}
	out := make([]resourceapi.ResourceClaimConsumerReference, len(claims))
	for i, claim := range claims {
		if out[i], err = resourceclaim.BindTo(pod, pg, podClaimFor(pod, claim)); err != nil {
			return nil, fmt.Errorf("resourceclaim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	return out, nil
}

// reservedFor: the claim is reserved for the pod, or for its PodGroup
// where the gate is on.
func (pl *GPUTopology) reservedFor(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	return resourceclaim.IsReservedForPod(pod, claim, pl.workloadClaims())
}

// podBinding is the pod's own reservedFor entry.
func podBinding(pod *v1.Pod) resourceapi.ResourceClaimConsumerReference {
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}
