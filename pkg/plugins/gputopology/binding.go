package gputopology

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// errBindingFailed: a device reported one of its binding failure
// conditions.
var errBindingFailed = errors.New("device binding failed")

// errBindingTimeout: the binding conditions were not all met within the
// binding timeout, counted from the allocation's timestamp.
var errBindingTimeout = errors.New("device binding timeout")

// unavailableOn says why an allocated claim cannot be used by the pod on
// node: allocated for other nodes, or its devices failed binding or timed
// out (then PostFilter deallocates it so that the next attempt allocates
// anew, as upstream does). Empty means usable.
func (pl *GPUTopology) unavailableOn(node *v1.Node, availableOn *nodeaffinity.NodeSelector, claim *resourceapi.ResourceClaim) string {
	if availableOn != nil && !availableOn.Match(node) {
		return fmt.Sprintf("resourceclaim %s is allocated on other nodes", klog.KObj(claim))
	}
	if claim.Status.Allocation == nil || !pl.features.DeviceBindingAndStatus {
		return ""
	}
	if _, err := pl.bindingReady(claim, time.Now()); err != nil {
		return err.Error()
	}
	return ""
}

// bindingReady reports whether every device of the claim with binding
// conditions has them all true. An error means the claim has to be
// allocated anew: a binding failure condition is true, or the binding
// timeout passed since status.allocation.allocationTimestamp.
func (pl *GPUTopology) bindingReady(claim *resourceapi.ResourceClaim, now time.Time) (bool, error) {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return false, nil
	}
	if r, f := failedBinding(claim); r != nil {
		return false, fmt.Errorf("%w: resourceclaim %s, device %s/%s/%s: condition %s", errBindingFailed, klog.KObj(claim), r.Driver, r.Pool, r.Device, f)
	}
	ready := bindingConditionsMet(alloc, claim)
	if !ready && bindingDeadlinePassed(alloc, pl.args.BindingTimeout.Duration, now) {
		return false, fmt.Errorf("%w: resourceclaim %s: binding conditions not met %s after allocation", errBindingTimeout, klog.KObj(claim), pl.args.BindingTimeout.Duration)
	}
	return ready, nil
}

// BindingFailed reports whether a device of the claim's allocation
// reports one of its binding failure conditions: the allocation will be
// freed (PostFilter), so the claim holds its pods nowhere.
func BindingFailed(claim *resourceapi.ResourceClaim) bool {
	r, _ := failedBinding(claim)
	return r != nil
}

// BindingPending reports whether a device of the claim's allocation
// still waits on one of its binding conditions (and none failed): the
// claim may time out, which only a trial of its pod finds out, as only
// GPUTopology knows its bindingTimeout.
func BindingPending(claim *resourceapi.ResourceClaim) bool {
	alloc := claim.Status.Allocation
	return alloc != nil && !BindingFailed(claim) && !bindingConditionsMet(alloc, claim)
}

// bindingConditionsMet: every binding condition of every allocated
// device is true.
func bindingConditionsMet(alloc *resourceapi.AllocationResult, claim *resourceapi.ResourceClaim) bool {
	for i := range alloc.Devices.Results {
		r := &alloc.Devices.Results[i]
		if len(r.BindingConditions) == 0 {
			continue
		}
		conds := deviceConditions(claim, r)
		for _, b := range r.BindingConditions {
			if !apimeta.IsStatusConditionTrue(conds, b) {
				return false
			}
		}
	}
	return true
}

// failedBinding is the first allocated device that reports one of its
// binding failure conditions, with that condition; nil when none does.
func failedBinding(claim *resourceapi.ResourceClaim) (*resourceapi.DeviceRequestAllocationResult, string) {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil, ""
	}
	for i := range alloc.Devices.Results {
		r := &alloc.Devices.Results[i]
		conds := deviceConditions(claim, r)
		for _, f := range r.BindingFailureConditions {
			if apimeta.IsStatusConditionTrue(conds, f) {
				return r, f
			}
		}
	}
	return nil, ""
}

// bindingDeadlinePassed: the timeout counts from the allocation, not
// from a scheduling attempt, so retries cannot extend it.
func bindingDeadlinePassed(alloc *resourceapi.AllocationResult, timeout time.Duration, now time.Time) bool {
	return alloc.AllocationTimestamp != nil && alloc.AllocationTimestamp.Add(timeout).Before(now)
}

// deviceConditions returns the conditions the driver reported in the
// claim's status for one allocated device.
func deviceConditions(claim *resourceapi.ResourceClaim, r *resourceapi.DeviceRequestAllocationResult) []metav1.Condition {
	for _, d := range claim.Status.Devices {
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device && (r.ShareID == nil || d.ShareID != nil && *d.ShareID == string(*r.ShareID)) {
			return d.Conditions
		}
	}
	return nil
}
