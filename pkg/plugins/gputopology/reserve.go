package gputopology

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Reserve records the allocation chosen for the node as in flight in the
// shared claim tracker, so that no other pod (of this or another profile)
// gets the same devices before PreBind writes it.
func (pl *GPUTopology) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.measureOnly {
		return nil
	}
	if err := pl.reserveShared(ctx, pod, s); err != nil {
		return fwk.AsStatus(err)
	}
	claims := s.toAllocateClaims()
	if v := s.extendedClaimOn(nodeName); v != nil {
		claims = append(claims, v.claim)
	}
	if len(claims) == 0 {
		return nil // the device plugin serves the pod's extended resources here
	}
	res := s.result(nodeName)
	if res == nil || len(res.Allocations) != len(claims) {
		return fwk.AsStatus(fmt.Errorf("internal error: no allocation for pod %s on node %s", klog.KObj(pod), nodeName))
	}
	// A pod group's trials are undone before the framework reserves the
	// chosen placement again outside the group cycle, on the same state:
	// a trial defers learning to PreBind, and that final Reserve learns.
	if pl.learner != nil && res.Quality.Request.GPUs > 0 {
		s.learnInPreBind = cs.GetPodGroupSchedulingCycle() != nil
		if !s.learnInPreBind {
			s.learned = pl.learn(pod, res)
		}
	}
	logger := klog.FromContext(ctx)
	for k, claim := range claims {
		claim := claim.DeepCopy()
		if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
			claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		}
		claim.Status.Allocation = &res.Allocations[k]
		if err := pl.draManager.ResourceClaims().SignalClaimPendingAllocation(claim.UID, claim); err != nil {
			return fwk.AsStatus(fmt.Errorf("reserve resourceclaim %s: %w", klog.KObj(claim), err))
		}
		s.signalled = append(s.signalled, claim.UID)
		logger.V(5).Info("Reserved devices", "pod", klog.KObj(pod), "claim", klog.KObj(claim), "node", nodeName, "allocation", klog.Format(claim.Status.Allocation))
	}
	// Later pods of a pod-group cycle may share these allocations.
	g, err := groupOf(cs, true)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if g != nil {
		for _, claim := range claims[:len(s.toAllocate)] { // not the extended-resource claim
			g.pending[claim.UID] = true
		}
	}
	return nil
}

// learnedRequest is a request counted in the learned workload.
type learnedRequest struct {
	class     topology.TaskClass
	placement string
}

// learn counts the pod's request, with where it may run, in the
// learned workload, and returns what it counted: nil when the pod was
// counted before (learnedPods).
func (pl *GPUTopology) learn(pod *v1.Pod, res *allocator.Result) *learnedRequest {
	if !pl.learnedPods.add(pod.UID) {
		return nil
	}
	l := &learnedRequest{class: res.Quality.Request, placement: pl.placements.remember(pod)}
	pl.learner.Observe(l.class, l.placement)
	return l
}

// reserveShared takes a share of the in-flight allocations of the claims
// the pod shares with an earlier pod of its group (podgroup.go).
func (pl *GPUTopology) reserveShared(ctx context.Context, pod *v1.Pod, s *stateData) error {
	for i, alloc := range s.shared {
		claim := s.claims[i].DeepCopy()
		if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
			claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		}
		claim.Status.Allocation = alloc
		if err := pl.draManager.ResourceClaims().SignalClaimPendingAllocation(claim.UID, claim); err != nil {
			return fmt.Errorf("share in-flight allocation of resourceclaim %s: %w", klog.KObj(claim), err)
		}
		s.signalled = append(s.signalled, claim.UID)
		klog.FromContext(ctx).V(5).Info("Shared in-flight allocation of the pod's group", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
	}
	return nil
}

// Unreserve drops in-flight allocations and this pod's reservations.
func (pl *GPUTopology) Unreserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	s, err := getState(cs)
	if err != nil {
		return
	}
	s.learnInPreBind = false // an undone trial is not learned
	if l := s.learned; l != nil && pl.learner != nil {
		// Nothing of it written: retried, the pod is counted anew.
		pl.learner.Forget(l.class, l.placement)
		pl.learnedPods.remove(pod.UID)
		s.learned = nil
	}
	logger := klog.FromContext(ctx)
	g, _ := groupOf(cs, false)
	signalled := s.signalled
	s.signalled = nil
	for _, claim := range s.claims {
		if slices.Contains(signalled, claim.UID) && pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(claim.UID, false) {
			pl.draManager.ResourceClaims().AssumedClaimRestore(claim.Namespace, claim.Name)
			if g != nil {
				delete(g.pending, claim.UID)
			}
			logger.V(5).Info("Released in-flight allocation", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
		}
		if claim.Status.Allocation != nil && resourceclaim.IsReservedForPod(pod, claim, false) {
			patch := fmt.Sprintf(`{"metadata": {"uid": %q}, "status": {"reservedFor": [{"$patch": "delete", "uid": %q}]}}`, claim.UID, pod.UID)
			if _, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Patch(ctx, claim.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				logger.Error(err, "Removing the pod's reservation failed", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
			}
		}
	}
	pl.unreserveExtended(ctx, pod, s, signalled)
}
