package gputopology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	resourceclaimmetrics "k8s.io/dynamic-resource-allocation/resourceclaim/metrics"
	"k8s.io/klog/v2"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// extendedClaimVisibleTimeout bounds the wait for the informer to carry
// a created extended-resource claim (upstream waits as long).
const extendedClaimVisibleTimeout = 2 * time.Minute

// bindExtendedClaim creates the node's extended-resource claim, writes
// its allocation and the pod's reservation, and records the claim and
// the container/request mapping in the pod's status, which the kubelet
// reads to hand each container its devices.
func (pl *GPUTopology) bindExtendedClaim(ctx context.Context, pod *v1.Pod, v *extendedVariant, s *stateData, allocation *resourceapi.AllocationResult, note func(string) string) (*resourceapi.ResourceClaim, error) {
	created, err := pl.createExtendedClaim(ctx, pod, v.claim)
	if err != nil {
		return nil, fmt.Errorf("create the claim of extended resources for pod %s: %w", klog.KObj(pod), err)
	}
	s.mu.Lock()
	s.ext.created = created
	s.mu.Unlock()
	bound, err := pl.bindClaim(ctx, pod, created, podBinding(pod), allocation, note(created.Name))
	if err != nil {
		return nil, err
	}
	pl.waitUntilAssumed(ctx, bound)
	status := pod.Status.DeepCopy()
	status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{RequestMappings: v.mappings, ResourceClaimName: bound.Name}
	if err := schedutil.PatchPodStatus(ctx, pl.clientset, pod.Name, pod.Namespace, &pod.Status, status); err != nil {
		return nil, fmt.Errorf("record extended resource claim %s in the status of pod %s: %w", bound.Name, klog.KObj(pod), err)
	}
	return bound, nil
}

// createExtendedClaim creates the pod's extended-resource claim from
// its in-memory form. It takes the name of an earlier attempt's claim
// that the pod's status still maps the resources to: a pods/status
// write cannot clear that mapping, and ResourceQuota admission charges
// an extended-resource claim the mapping does not name on top of the
// pod's own requests, so after a failed binding a claim under a new name
// was charged twice, and a quota sized to the pod refused every retry.
// That claim is gone (Unreserve deleted it; had it been there, PreFilter
// would have used it); if its name is still taken, a new one is made.
func (pl *GPUTopology) createExtendedClaim(ctx context.Context, pod *v1.Pod, inMemory *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	fresh := inMemory.DeepCopy()
	fresh.Name, fresh.UID = "", ""
	fresh.Status = resourceapi.ResourceClaimStatus{}
	claims := pl.clientset.ResourceV1().ResourceClaims(pod.Namespace)
	if m := pod.Status.ExtendedResourceClaimStatus; m != nil && m.ResourceClaimName != "" {
		fresh.Name = m.ResourceClaimName
		created, err := claims.Create(ctx, fresh, metav1.CreateOptions{})
		countClaimCreate(err)
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		klog.FromContext(ctx).V(2).Info("Claim of an earlier attempt still there, making the extended resource claim under a new name", "pod", klog.KObj(pod), "claim", klog.KRef(pod.Namespace, m.ResourceClaimName))
		fresh.Name = ""
	}
	created, err := claims.Create(ctx, fresh, metav1.CreateOptions{})
	countClaimCreate(err)
	return created, err
}

// countClaimCreate counts a creation of an extended-resource claim in
// kube-scheduler's dynamic_resource_allocation_resourceclaim_creates_total,
// labelled as the in-tree plugin labels it (such a claim never asks for
// admin access), so that dashboards built on it read the same.
func countClaimCreate(err error) {
	status := "success"
	if err != nil {
		status = "failure"
	}
	resourceclaimmetrics.ResourceClaimCreate.WithLabelValues(status, "false", "", "Pod").Inc()
}

// waitUntilAssumed waits for the informer to carry the claim the
// scheduler just created, so that its allocation counts for the next
// pods; the claim is written either way, so a timeout is only logged.
func (pl *GPUTopology) waitUntilAssumed(ctx context.Context, claim *resourceapi.ResourceClaim) {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, extendedClaimVisibleTimeout, true, func(context.Context) (bool, error) {
		err := pl.draManager.ResourceClaims().AssumeClaimAfterAPICall(claim)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, assumecache.ErrNotFound):
			return false, nil
		}
		return false, err
	})
	if err != nil {
		klog.FromContext(ctx).V(5).Info("Extended resource claim not in the assume cache", "claim", klog.KObj(claim), "err", err)
	}
}

// unreserveExtended drops the extended-resource claim's in-flight
// allocation, if Reserve recorded it (signalled), and deletes the claim
// if PreBind created it.
func (pl *GPUTopology) unreserveExtended(ctx context.Context, pod *v1.Pod, s *stateData, signalled []types.UID) {
	if s.ext == nil {
		return
	}
	claims := pl.draManager.ResourceClaims()
	if slices.Contains(signalled, s.ext.claim.UID) && claims.MaybeRemoveClaimPendingAllocation(s.ext.claim.UID, false) {
		claims.AssumedClaimRestore(s.ext.claim.Namespace, s.ext.claim.Name)
	}
	s.mu.Lock()
	created := s.ext.created
	s.ext.created = nil
	s.mu.Unlock()
	if created == nil {
		return
	}
	if err := pl.deleteClaim(ctx, created); err != nil {
		klog.FromContext(ctx).Error(err, "Deleting the extended resource claim failed", "pod", klog.KObj(pod), "claim", klog.KObj(created))
	}
}

// deleteClaim deletes a claim the scheduler made, first removing the
// delete-protection finalizer it added.
func (pl *GPUTopology) deleteClaim(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	claims := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.Index(latest.Finalizers, resourceapi.Finalizer)
		if i < 0 {
			return nil
		}
		latest.Finalizers = slices.Delete(latest.Finalizers, i, i+1)
		_, err = claims.Update(ctx, latest, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the finalizer of resourceclaim %s: %w", klog.KObj(claim), err)
	}
	if err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete resourceclaim %s: %w", klog.KObj(claim), err)
	}
	return nil
}
