package gputopology

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// PreBindPreFlight skips PreBind for pods without claims.
func (pl *GPUTopology) PreBindPreFlight(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	result := &fwk.PreBindPreFlightResult{AllowParallel: true}
	if s, err := getState(cs); err != nil || (len(s.claims) == 0 && s.ext == nil) {
		return result, fwk.NewStatus(fwk.Skip)
	}
	return result, nil
}

// PreBind writes allocations (with the delete-protection finalizer) and
// the pod's reservation into the claims, as upstream does, waits for
// device binding conditions, and tells the user which devices were chosen
// and why.
func (pl *GPUTopology) PreBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	res := s.result(nodeName)
	if s.learnInPreBind && res != nil {
		s.learnInPreBind = false
		s.learned = pl.learn(pod, res)
	}
	ext := s.extendedClaimOn(nodeName)
	allocationOf := make(map[int]*resourceapi.AllocationResult, len(s.toAllocate))
	names := make([]string, 0, len(s.toAllocate)+1)
	if res != nil {
		for k, i := range s.toAllocate {
			allocationOf[i] = &res.Allocations[k]
			names = append(names, s.claims[i].Name)
		}
	}
	maps.Copy(allocationOf, s.shared)
	// note words the placement. The pod's own claims are written before
	// the extended-resource claim is made, which may yet fail (a quota,
	// a webhook): their note names their own devices, the extended
	// claim's (given its name) every claim's.
	note := func(extendedName string) string {
		if res == nil {
			return ""
		}
		named := names
		if extendedName != "" {
			named = append(slices.Clip(names), extendedName)
		}
		return pl.explain(ctx, pod, nodeName, named, res)
	}
	// A claim is in flight until written; once written, the assume cache
	// holds its allocation and it leaves the in-flight set at once: if a
	// later claim's write fails, Unreserve must not restore the informer's
	// older copy, which would show the written devices free until the
	// watch delivers the write (and another pod could be given them).
	written := func(uid types.UID) { pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(uid, true) }
	for i, claim := range s.claims {
		if pl.reservedFor(pod, claim) {
			continue
		}
		// A claim shared with a pod of the group that allocated it gets
		// no note here: this pod's would word its own claims.
		var why string
		if _, shared := s.shared[i]; allocationOf[i] != nil && !shared {
			why = note("")
		}
		updated, err := pl.bindClaim(ctx, pod, claim, s.bindTo[i], allocationOf[i], why)
		if err != nil {
			return fwk.AsStatus(err)
		}
		s.claims[i] = updated
		written(claim.UID)
		if allocationOf[i] != nil {
			// An allocation is written: the pod stays counted, and its
			// retry, if any, is not counted again (learnedPods).
			s.learned = nil
		}
	}
	if ext != nil && res != nil {
		bound, err := pl.bindExtendedClaim(ctx, pod, ext, s, &res.Allocations[len(s.toAllocate)], note)
		if err != nil {
			return fwk.AsStatus(err)
		}
		written(ext.claim.UID)
		// Binding conditions are waited for on it as on the others.
		s.claims = append(s.claims, bound)
	}
	if err := pl.waitForBindingConditions(ctx, pod, nodeName, s); err != nil {
		return fwk.AsStatus(err)
	}
	// A pod whose claims take nothing (admin access only) is no choice.
	if res != nil && res.Quality.Request.GPUs > 0 {
		observeChoice(res.Quality)
	}
	return nil
}

// PlacementAnnotation on an allocated claim says which devices the
// scheduler chose and why. It is written with the claim's finalizer, in
// the same API call: an Event per pod would be one more write per
// scheduled pod, which costs throughput on a busy API server.
const PlacementAnnotation = contract.PlacementAnnotation

// bindClaim writes the allocation (when the pod's cycle made it) and the
// reservation binding (the pod, or its PodGroup) into the claim.
func (pl *GPUTopology) bindClaim(ctx context.Context, pod *v1.Pod, claim *resourceapi.ResourceClaim, binding resourceapi.ResourceClaimConsumerReference, allocation *resourceapi.AllocationResult, note string) (*resourceapi.ResourceClaim, error) {
	logger := klog.FromContext(ctx)
	claims := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace)
	refresh := false
	// The allocation the pod was placed for: this cycle's, or the one the
	// cycle found written. A claim freed and allocated anew since (a pod
	// sharing it failed elsewhere, its PostFilter freed it) is not
	// reserved: the pod would run on a node its devices are not on.
	expect := allocation
	if expect == nil {
		expect = claim.Status.Allocation
	}
	claim = claim.DeepCopy()
	// Its own copy: the allocation is also the claim tracker's in-flight
	// entry and, for a claim shared in a pod group, the one the group's
	// other pods bind on their own goroutines; the timestamp is set below.
	allocation = allocation.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if refresh {
			latest, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get resourceclaim %s after conflict: %w", klog.KObj(claim), err)
			}
			// Recreated under the same name: this cycle's allocation was
			// made for the old claim's requests, and its in-flight entry
			// is under the old UID, which Unreserve drops.
			if latest.UID != claim.UID {
				return fmt.Errorf("resourceclaim %s was deleted and made again in the meantime", klog.KObj(claim))
			}
			claim = latest
		}
		refresh = true
		if claim.DeletionTimestamp != nil {
			return fmt.Errorf("resourceclaim %s got deleted in the meantime", klog.KObj(claim))
		}
		if claim.Status.Allocation != nil && expect != nil && !sameDevices(claim.Status.Allocation, expect) {
			return fmt.Errorf("resourceclaim %s got allocated elsewhere in the meantime", klog.KObj(claim))
		}
		if allocation != nil && claim.Status.Allocation != nil {
			// Written by another pod of the group sharing the claim,
			// which notes only claims its own cycle allocated: the note
			// is this pod's.
			allocation = nil
			annotated, err := annotate(ctx, claims, claim, note, false)
			if err != nil {
				return err
			}
			claim = annotated
		}
		if allocation != nil {
			// A claim deallocated after a failed binding keeps its
			// finalizer; its note is written again for the new devices.
			annotated, err := annotate(ctx, claims, claim, note, true)
			if err != nil {
				return err
			}
			claim = annotated
			claim.Status.Allocation = allocation
			// As upstream, only with binding conditions on: the binding
			// timeout counts from it. Unlike upstream, an allocation made
			// elsewhere without one is left so: the API server refuses any
			// change to status.allocation once set, and upstream's PreBind
			// then fails on such a claim every time
			// (TestBindingConditions).
			if pl.features.DeviceBindingAndStatus && allocation.AllocationTimestamp == nil {
				allocation.AllocationTimestamp = &metav1.Time{Time: time.Now()}
			}
		}
		if claim.Status.Allocation == nil {
			return fmt.Errorf("resourceclaim %s got deallocated elsewhere in the meantime", klog.KObj(claim))
		}
		if allocation == nil && reservedForUID(claim, binding.UID) {
			// Reserved for the pod's PodGroup by another pod of it.
			return nil
		}
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, binding)
		updated, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			if written := writtenAnyway(ctx, claims, claim, binding, err); written != nil {
				logger.V(3).Info("Claim written though its write failed", "claim", klog.KObj(claim), "err", err)
				claim = written
				return nil
			}
			return fmt.Errorf("write allocation and reservation of resourceclaim %s: %w", klog.KObj(claim), err)
		}
		claim = updated
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := pl.draManager.ResourceClaims().AssumeClaimAfterAPICall(claim); err != nil {
		logger.V(5).Info("Claim not stored in assume cache", "claim", klog.KObj(claim), "err", err)
	}
	logger.V(5).Info("Claim allocated and reserved", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
	return claim, nil
}

func hasBindingConditions(claim *resourceapi.ResourceClaim) bool {
	return claim.Status.Allocation != nil && slices.ContainsFunc(claim.Status.Allocation.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool {
		return len(r.BindingConditions) > 0
	})
}

// sameDevices: two allocations of the same devices on the same nodes.
func sameDevices(a, b *resourceapi.AllocationResult) bool {
	return apiequality.Semantic.DeepEqual(a.Devices.Results, b.Devices.Results) && apiequality.Semantic.DeepEqual(a.NodeSelector, b.NodeSelector)
}

// annotate adds to the claim what it lacks, in one update: the placement
// note (unless note is ""), and, when this pod writes the claim's
// allocation (allocating), the finalizer; a note another pod's cycle
// wrote is replaced only then. The claim as it is when it lacks nothing.
func annotate(ctx context.Context, claims resourcev1client.ResourceClaimInterface, claim *resourceapi.ResourceClaim, note string, allocating bool) (*resourceapi.ResourceClaim, error) {
	addFinalizer := allocating && !slices.Contains(claim.Finalizers, resourceapi.Finalizer)
	have := claim.Annotations[PlacementAnnotation]
	addNote := note != "" && have != note && (allocating || have == "")
	if !addFinalizer && !addNote {
		return claim, nil
	}
	if addFinalizer {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	}
	if addNote {
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[PlacementAnnotation] = note
	}
	updated, err := claims.Update(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("add finalizer and placement note to resourceclaim %s: %w", klog.KObj(claim), err)
	}
	return updated, nil
}

// writtenAnyway reads the claim back after its status write failed with
// err, and returns it when it holds what was written: a write that timed
// out, or whose answer was lost, may have taken effect. Treated as
// failed, its devices would leave the in-flight set and look free until
// the watch delivered the write, and another pod could be given them. A
// conflict is retried instead; nil when the claim cannot be read.
func writtenAnyway(ctx context.Context, claims resourcev1client.ResourceClaimInterface, wrote *resourceapi.ResourceClaim, binding resourceapi.ResourceClaimConsumerReference, err error) *resourceapi.ResourceClaim {
	if apierrors.IsConflict(err) {
		return nil
	}
	latest, getErr := claims.Get(ctx, wrote.Name, metav1.GetOptions{})
	if getErr != nil || latest.UID != wrote.UID || latest.Status.Allocation == nil || !sameDevices(latest.Status.Allocation, wrote.Status.Allocation) {
		return nil
	}
	if !reservedForUID(latest, binding.UID) {
		return nil
	}
	return latest
}

// reservedForUID reports whether the claim is reserved for the consumer
// (a pod, or a PodGroup) with this UID.
func reservedForUID(claim *resourceapi.ResourceClaim, uid types.UID) bool {
	return slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == uid })
}

// podClaimFor finds the pod's entry that names the claim.
func podClaimFor(pod *v1.Pod, claim *resourceapi.ResourceClaim) *v1.PodResourceClaim {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if name, _, err := resourceclaim.Name(pod, pc); err == nil && name != nil && *name == claim.Name {
			return pc
		}
	}
	return &v1.PodResourceClaim{Name: claim.Name, ResourceClaimName: &claim.Name}
}

// waitForBindingConditions waits until every allocated device with
// binding conditions reports them all true in the claim's status. A
// failure condition, or the binding timeout counted from the allocation,
// ends the wait with an error: Unreserve then drops the pod's
// reservation, and the next attempt's Filter and PostFilter deallocate
// the claim so that it is allocated anew. The wait feeds kube-scheduler's
// binding-condition metrics, as the in-tree plugin does.
func (pl *GPUTopology) waitForBindingConditions(ctx context.Context, pod *v1.Pod, nodeName string, s *stateData) error {
	// As upstream: nothing to wait for without the binding-condition
	// gates, or when no device of the pod's claims has conditions (its
	// claims as just written; the claim cache may not hold a new one yet).
	if !pl.features.DeviceBindingAndStatus || !slices.ContainsFunc(s.claims, hasBindingConditions) {
		return nil
	}
	start := time.Now()
	err := pl.awaitBinding(ctx, pod, nodeName, s)
	observeBindingWait(pl.fh.ProfileName(), s.claims, time.Since(start), err)
	return err
}

// awaitBinding polls the pod's claims until their binding conditions are
// met, one fails, or bindingTimeout passes.
func (pl *GPUTopology) awaitBinding(ctx context.Context, pod *v1.Pod, nodeName string, s *stateData) error {
	// pending reads every claim before judging any, so that s.claims is
	// what the timeout's message reports.
	pending := func() (bool, error) {
		for i, c := range s.claims {
			claim, err := pl.draManager.ResourceClaims().Get(c.Namespace, c.Name)
			if err != nil {
				return false, err
			}
			if claim.Status.Allocation == nil {
				return false, fmt.Errorf("resourceclaim %s got deallocated while waiting for binding conditions", klog.KObj(claim))
			}
			s.claims[i] = claim
		}
		for _, claim := range s.claims {
			ready, err := bindingReady(claim, pl.args.BindingTimeout.Duration, time.Now())
			if err != nil || !ready {
				return !ready, err
			}
		}
		return false, nil
	}
	waiting, err := pending()
	if err != nil || !waiting {
		return err
	}
	pl.fh.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "BindingConditionsPending", "Scheduling", "waiting for binding conditions of devices on node %s", nodeName)
	// bindingReady ends the wait at the claims' own deadline; the poll's
	// limit ends it for a claim allocated elsewhere without a timestamp.
	err = wait.PollUntilContextTimeout(ctx, time.Second, pl.args.BindingTimeout.Duration+time.Second, false, func(context.Context) (bool, error) {
		waiting, err := pending()
		return !waiting, err
	})
	switch {
	case err == nil:
		return nil
	case wait.Interrupted(err) && ctx.Err() == nil:
		return fmt.Errorf("%w: %s", errBindingTimeout, stillWaiting(s.claims, pl.args.BindingTimeout.Duration))
	}
	return fmt.Errorf("waiting for device binding conditions: %w", err)
}

// stillWaiting names the claims whose devices' binding conditions were
// not met within the timeout, and what they wait for.
func stillWaiting(claims []*resourceapi.ResourceClaim, timeout time.Duration) string {
	var out []string
	for _, c := range claims {
		if _, waiting := topology.BindingStatus(c); len(waiting) > 0 {
			out = append(out, fmt.Sprintf("resourceclaim %s: binding conditions not met within %s: waiting for %s", klog.KObj(c), timeout, topology.JoinDeviceConditions(waiting)))
		}
	}
	return strings.Join(out, "; ")
}

// explain words the placement note written on the claims
// (PlacementAnnotation): the devices of the named claims, the first of
// the result's allocations, and why they were chosen. It logs the same
// at verbosity 3.
func (pl *GPUTopology) explain(ctx context.Context, pod *v1.Pod, nodeName string, claims []string, res *allocator.Result) string {
	var devices []string
	for k, claim := range claims {
		var names []string
		for _, r := range res.Allocations[k].Devices.Results {
			names = append(names, r.Device)
		}
		devices = append(devices, fmt.Sprintf("%s=[%s]", claim, strings.Join(names, ",")))
	}
	msg := fmt.Sprintf("allocated %s on node %s: %s", strings.Join(devices, " "), nodeName, why(res.Quality))
	klog.FromContext(ctx).V(3).Info("Devices allocated", "pod", klog.KObj(pod), "node", nodeName, "devices", devices, "quality", res.Quality)
	return msg
}

// why words the quality for people.
func why(q allocator.Quality) string {
	var parts []string
	if q.MultiDevice {
		parts = append(parts, "link class "+q.WorstLink.String())
	}
	if q.IntactnessBefore > 0 {
		parts = append(parts, fmt.Sprintf("free NVLink groups intactness %.2f->%.2f", q.IntactnessBefore, q.Intactness))
	}
	if q.MIGPlaceableBefore > 0 {
		parts = append(parts, fmt.Sprintf("MIG placeability %.2f->%.2f", q.MIGPlaceableBefore, q.MIGPlaceable))
	}
	if q.FragmentationBefore > 0 || q.Fragmentation > 0 {
		parts = append(parts, fmt.Sprintf("fragmentation %.3f->%.3f GPUs", q.FragmentationBefore, q.Fragmentation))
	}
	parts = append(parts, fmt.Sprintf("best of %d feasible allocations", q.Explored))
	return strings.Join(parts, ", ")
}
