package gputopology

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// SignPod lets the scheduler batch pods without claims (opportunistic
// batching, KEP-5598): GPUTopology adds nothing to their signature. Pods
// with claims, or with extended resources backed by DRA, are refused as
// the in-tree DynamicResources plugin refuses pods with claims: their
// devices are not a function of the pod's spec alone.
func (pl *GPUTopology) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if st := refuseClaims(pod); st != nil {
		return nil, st
	}
	if classOf, _ := pl.draExtendedResources(pod); len(classOf) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods with DRA extended resources are not signable")
	}
	return nil, nil
}

// SignPod signs for a QualityScorer what GPUTopology signs (nothing for
// pods without claims) and refuses pods with claims the same way: it
// scores only nodes where GPUTopology allocated.
func (s *QualityScorer) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, refuseClaims(pod)
}

// refuseClaims is the refusal of pods with claims, nil for others.
func refuseClaims(pod *v1.Pod) *fwk.Status {
	if len(pod.Spec.ResourceClaims) > 0 {
		return fwk.NewStatus(fwk.Unschedulable, "pods with DRA resource claims are not signable")
	}
	return nil
}
