package gputopology

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/ptr"
)

// podClaims returns the pod's claims from the shared claim tracker (which
// includes the scheduler's own not yet observed updates). An error means
// the pod cannot be scheduled yet: a claim from a template not created,
// a claim being deleted, a claim owned by another pod.
func (pl *GPUTopology) podClaims(pod *v1.Pod) ([]*resourceapi.ResourceClaim, error) {
	claims := make([]*resourceapi.ResourceClaim, 0, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, err
		}
		if name == nil {
			// Template says no claim needed.
			continue
		}
		claim, err := pl.draManager.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("pod.spec.resourceClaims[%s]: resourceclaim %s/%s: %w", pc.Name, pod.Namespace, *name, err)
		}
		if claim.DeletionTimestamp != nil {
			return nil, fmt.Errorf("resourceclaim %s/%s is being deleted", claim.Namespace, claim.Name)
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim, pl.workloadClaims()); err != nil {
				if owner := podGroupOwner(claim); owner != "" && !pl.workloadClaims() {
					return nil, fmt.Errorf("resourceclaim %s/%s belongs to PodGroup %s: the scheduler runs without the DRAWorkloadResourceClaims feature gate, which pod-group claims need", claim.Namespace, claim.Name, owner)
				}
				return nil, err
			}
		}
		claims = append(claims, claim)
	}
	return claims, nil
}

// PreEnqueue keeps pods out of the active queue while a claim they need
// does not exist yet.
func (pl *GPUTopology) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	if _, err := pl.podClaims(pod); err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return nil
}

// EventsToRegister lists the events pods wait for: claims, slices,
// classes and nodes. It also refuses a profile that enables
// DynamicResources too (checkProfile).
func (pl *GPUTopology) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := checkProfile(pl.fh); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	return []fwk.ClusterEventWithHint{
		// Node labels can make network-attached devices available; a
		// node's allocatable decides whether an extended resource is
		// served there by a device plugin or through DRA (as upstream).
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAllocatable}},
		// Allocations live in claims: a freed claim frees devices, a
		// created claim unblocks its pod.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterClaimChange},
		// A pod whose binding failed gives back devices it held only in
		// flight, which no claim event announces (not registered upstream,
		// where such waiting pods wait for the queue's periodic flush).
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodDelete},
		// The resourceclaim controller records generated claim names in
		// the pod's status.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodGeneratedResourceClaim}, QueueingHintFn: pl.isSchedulableAfterPodUpdate},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}},
		// New devices, or taints removed.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

// isSchedulableAfterClaimChange: a deallocated or deleted allocated claim
// frees devices for everyone; other changes matter only to pods that use
// the claim.
func (pl *GPUTopology) isSchedulableAfterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	if newObj == nil {
		if _, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
			return fwk.Queue, nil
		}
		old, ok := oldObj.(*resourceapi.ResourceClaim)
		if !ok {
			return fwk.Queue, fmt.Errorf("unexpected object %T", oldObj)
		}
		// The pod's own extended-resource claim left from an earlier
		// attempt is gone: it can try again.
		if old.Status.Allocation == nil && ExtendedClaimOf(pod, []*resourceapi.ResourceClaim{old}) == nil {
			return fwk.QueueSkip, nil
		}
		return fwk.Queue, nil
	}
	modified, ok := newObj.(*resourceapi.ResourceClaim)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T", newObj)
	}
	var original *resourceapi.ResourceClaim
	if oldObj != nil {
		if original, ok = oldObj.(*resourceapi.ResourceClaim); !ok {
			return fwk.Queue, fmt.Errorf("unexpected object %T", oldObj)
		}
	}
	if original != nil && original.Status.Allocation != nil && modified.Status.Allocation == nil {
		// As upstream: a pod still waiting for its own claims to exist
		// has nothing to gain from freed devices.
		if _, err := pl.podClaims(pod); err != nil {
			return fwk.QueueSkip, nil
		}
		logger.V(6).Info("Claim deallocated", "pod", klog.KObj(pod), "claim", klog.KObj(modified))
		return fwk.Queue, nil
	}
	// Most events concern other pods' claims: decide that from the names
	// the pod refers to, without reading its claims (this runs for every
	// waiting pod on every claim event).
	if !refersTo(pod, modified) {
		return fwk.QueueSkip, nil
	}
	if _, err := pl.podClaims(pod); err != nil {
		return fwk.QueueSkip, nil
	}
	switch {
	case original == nil:
		return fwk.Queue, nil
	case apiequality.Semantic.DeepEqual(&original.Status, &modified.Status):
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// isSchedulableAfterAssignedPodDelete: the scheduler reports a pod whose
// binding cycle failed as deleted. Devices it held only in flight (its
// claims not yet written, or written without reserving them for it) are
// free again, and no claim event says so. A pod deleted while its claims
// are allocated and reserved for it frees them only when they are
// deallocated, which a claim event announces.
func (pl *GPUTopology) isSchedulableAfterAssignedPodDelete(logger klog.Logger, pod *v1.Pod, oldObj, _ interface{}) (fwk.QueueingHint, error) {
	if _, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		return fwk.Queue, nil
	}
	gone, ok := oldObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T", oldObj)
	}
	// A pod that ran to completion gave its devices back through its
	// claims (the resourceclaim controller frees them before the pod is
	// deleted): claim events announced it. A pod whose binding failed
	// never ran.
	if podutil.IsPodPhaseTerminal(gone.Status.Phase) || !pl.heldInFlight(gone) {
		return fwk.QueueSkip, nil
	}
	logger.V(6).Info("Devices held in flight released", "pod", klog.KObj(pod), "releasedBy", klog.KObj(gone))
	return fwk.Queue, nil
}

// heldInFlight: one of the pod's claims (or its DRA extended resources)
// is not allocated and reserved for it, so whatever the scheduler held
// for it was held in memory only.
func (pl *GPUTopology) heldInFlight(pod *v1.Pod) bool {
	// This runs for every waiting pod on every deletion of a pod: most
	// deleted pods ask for no devices, known without summing requests.
	extended := requestsExtendedResources(pod)
	if len(pod.Spec.ResourceClaims) == 0 && !extended {
		return false
	}
	names := make([]string, 0, len(pod.Spec.ResourceClaims)+1)
	for i := range pod.Spec.ResourceClaims {
		if name := claimNameOf(pod, &pod.Spec.ResourceClaims[i]); name != "" {
			names = append(names, name)
		}
	}
	if extended {
		if classOf, _ := pl.draExtendedResources(pod); len(classOf) > 0 {
			st := pod.Status.ExtendedResourceClaimStatus
			if st == nil {
				// Its claim is created in PreBind: a failure before that
				// held devices in memory only (or on a device-plugin node,
				// none).
				return true
			}
			names = append(names, st.ResourceClaimName)
		}
	}
	for _, name := range names {
		claim, err := pl.draManager.ResourceClaims().Get(pod.Namespace, name)
		if err != nil || claim.Status.Allocation == nil || !pl.reservedFor(pod, claim) {
			return true
		}
	}
	return false
}

// requestsExtendedResources: a container of the pod asks for a resource
// that DRA could serve.
func requestsExtendedResources(pod *v1.Pod) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			for name := range list[i].Resources.Requests {
				if schedutil.IsDRAExtendedResourceName(name) {
					return true
				}
			}
		}
	}
	return false
}

func (pl *GPUTopology) isSchedulableAfterPodUpdate(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	modified, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T", newObj)
	}
	if _, err := pl.podClaims(modified); err != nil {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// podGroupOwner is the name of the PodGroup that owns the claim (a
// claim of PodGroup.spec.resourceClaims), "" when none does.
func podGroupOwner(claim *resourceapi.ResourceClaim) string {
	for _, o := range claim.OwnerReferences {
		if o.Kind == "PodGroup" && o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return ""
}

// refersTo: one of the pod's resourceClaims entries names claim (directly
// or as the claim generated for it, from the pod's status).
func refersTo(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	if pod.Namespace != claim.Namespace {
		return false
	}
	for i := range pod.Spec.ResourceClaims {
		if claimNameOf(pod, &pod.Spec.ResourceClaims[i]) == claim.Name {
			return true
		}
	}
	return false
}

// claimNameOf is resourceclaim.Name without its error, "" where the name
// is not known (yet): the hint that calls it runs for every waiting pod on
// every claim event, and building the error took 2% of the scheduler's
// CPU on 5,000 nodes.
func claimNameOf(pod *v1.Pod, pc *v1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	if pc.ResourceClaimTemplateName == nil {
		return ""
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name {
			return ptr.Deref(st.ResourceClaimName, "")
		}
	}
	return ""
}
