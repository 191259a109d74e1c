package gputopology

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/topology"
)

// errBindingFailed: a device reported one of its binding failure
// conditions.
var errBindingFailed = errors.New("device binding failed")

// errBindingTimeout: the binding conditions were not all met within the
// binding timeout, counted from the allocation's timestamp.
var errBindingTimeout = errors.New("device binding timeout")

// unavailableOn says why an allocated claim cannot be used by the pod on
// node: allocated for other nodes, on devices whose node operations are
// skipped where the node does not declare that it can run without them,
// or its devices failed binding or timed out (then PostFilter deallocates
// it so that the next attempt allocates anew, as upstream does). Empty
// means usable.
func (pl *GPUTopology) unavailableOn(node *v1.Node, availableOn *nodeaffinity.NodeSelector, claim *resourceapi.ResourceClaim) string {
	if availableOn != nil && !availableOn.Match(node) {
		return fmt.Sprintf("resourceclaim %s is allocated on other nodes", klog.KObj(claim))
	}
	if skipsNodeOperations(claim.Status.Allocation) && !slices.Contains(node.Status.DeclaredFeatures, draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate) {
		return fmt.Sprintf("resourceclaim %s is allocated on devices that skip node operations, which the node does not declare it supports (%s)", klog.KObj(claim), draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate)
	}
	if err := pl.bindingRule().unusable(claim, time.Now()); err != nil {
		return err.Error()
	}
	return ""
}

// skipsNodeOperations: a device of the allocation skips node operations
// (DRAOptionalNodeOperations). Checked whatever this scheduler's gate, as
// upstream checks it: another scheduler may have made the allocation.
func skipsNodeOperations(alloc *resourceapi.AllocationResult) bool {
	if alloc == nil {
		return false
	}
	return slices.ContainsFunc(alloc.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool {
		return len(r.SkipNodeOperations) > 0
	})
}

// bindingReady reports whether every device of the claim with binding
// conditions has them all true. An error means the claim has to be
// allocated anew: a binding failure condition is true, or the binding
// timeout passed since status.allocation.allocationTimestamp.
func bindingReady(claim *resourceapi.ResourceClaim, timeout time.Duration, now time.Time) (bool, error) {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return false, nil
	}
	failed, waiting := topology.BindingStatus(claim)
	if len(failed) > 0 {
		r, f := failed[0].Device, failed[0].Condition
		return false, fmt.Errorf("%w: resourceclaim %s, device %s/%s/%s: condition %s", errBindingFailed, klog.KObj(claim), r.Driver, r.Pool, r.Device, f)
	}
	if len(waiting) > 0 && bindingDeadlinePassed(alloc, timeout, now) {
		return false, fmt.Errorf("%w: resourceclaim %s: binding conditions not met %s after allocation", errBindingTimeout, klog.KObj(claim), timeout)
	}
	return len(waiting) == 0, nil
}

// bindingRule is how a profile's GPUTopology judges a claim's binding
// conditions.
type bindingRule struct {
	enabled bool          // DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on
	timeout time.Duration // its bindingTimeout
}

func (pl *GPUTopology) bindingRule() bindingRule {
	return bindingRule{enabled: pl.features.DeviceBindingAndStatus, timeout: pl.args.BindingTimeout.Duration}
}

// unusable says why the allocated claim's binding conditions make it
// unusable (bindingReady's error); nil when usable, not allocated, or the
// rule's gates are off.
func (r bindingRule) unusable(claim *resourceapi.ResourceClaim, now time.Time) error {
	if claim.Status.Allocation == nil || !r.enabled {
		return nil
	}
	_, err := bindingReady(claim, r.timeout, now)
	return err
}

// bindingRules holds each profile's bindingRule by profile name, for
// GPUCliquePlacement: it must tell a claim that GPUTopology will free
// from one still binding, and only GPUTopology's args say when binding
// times out. A scheduler's profiles have distinct names.
var bindingRules sync.Map

// BindingUnusable reports whether the profile's GPUTopology finds the
// claim unusable for its binding conditions, so that it frees the claim
// when a trial of its pod fails: a device reports a binding failure
// condition, or the conditions were not all met within bindingTimeout of
// the allocation. In a profile without GPUTopology only a failure counts.
func BindingUnusable(profile string, claim *resourceapi.ResourceClaim, now time.Time) bool {
	r, ok := bindingRules.Load(profile)
	if !ok {
		failed, _ := topology.BindingStatus(claim)
		return len(failed) > 0
	}
	return r.(bindingRule).unusable(claim, now) != nil
}

// bindingDeadlinePassed: the timeout counts from the allocation, not
// from a scheduling attempt, so retries cannot extend it.
func bindingDeadlinePassed(alloc *resourceapi.AllocationResult, timeout time.Duration, now time.Time) bool {
	return alloc.AllocationTimestamp != nil && alloc.AllocationTimestamp.Add(timeout).Before(now)
}
