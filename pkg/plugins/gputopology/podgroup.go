package gputopology

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"
)

// Pod groups (the Workload API) are scheduled in one cycle: each pod of
// the group is filtered and reserved in turn, in every placement the
// framework tries, and every trial is reverted before the chosen one is
// reserved again. A claim that several pods of the group share is
// allocated by the first pod's Reserve (an in-flight allocation); the
// later pods of the same cycle use that allocation instead of waiting for
// it to be written, as the in-tree plugin does, and each takes a share of
// the in-flight entry so that it stays until the last of them is bound or
// unreserved.

// groupState is the pod-group cycle's record of the claims whose
// in-flight allocation one of its pods made.
type groupState struct {
	pending map[types.UID]bool
	// pods: each pod's state of its latest trial, for PodGroupPostFilter.
	pods map[types.NamespacedName]*stateData
}

// Clone shares the state: a group's cycle is synchronous.
func (g *groupState) Clone() fwk.StateData { return g }

// groupOf returns the pod-group cycle's state; nil outside a pod-group
// cycle (and in the binding cycle, which the framework runs without it).
func groupOf(cs fwk.CycleState, create bool) (*groupState, error) {
	pg := cs.GetPodGroupSchedulingCycle()
	if pg == nil {
		return nil, nil
	}
	v, err := pg.Read(stateKey)
	if err != nil {
		if !create {
			return nil, nil
		}
		g := &groupState{pending: map[types.UID]bool{}, pods: map[types.NamespacedName]*stateData{}}
		pg.Write(stateKey, g)
		return g, nil
	}
	g, ok := v.(*groupState)
	if !ok {
		return nil, fmt.Errorf("%s pod-group state has type %T, want *groupState", Name, v)
	}
	return g, nil
}

// recordInGroup keeps the pod's state of its latest trial in the
// pod-group cycle for PodGroupPostFilter, as upstream keeps it for every
// pod that reaches PreFilter: a pod with no claim to free (none at all,
// or PreFilter stopped before reading them) lets PodGroupPostFilter free
// the PodGroup's claims. Nothing outside a pod-group cycle.
func recordInGroup(cs fwk.CycleState, pod *v1.Pod, s *stateData) error {
	g, err := groupOf(cs, true)
	if err != nil || g == nil {
		return err
	}
	g.pods[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = s
	return nil
}

// sharedPending is the in-flight allocation of claim made by another pod
// of the same pod-group cycle, which this pod may use; nil otherwise.
func (pl *GPUTopology) sharedPending(cs fwk.CycleState, claim *resourceapi.ResourceClaim) (*resourceapi.AllocationResult, error) {
	g, err := groupOf(cs, false)
	if err != nil || g == nil || !g.pending[claim.UID] {
		return nil, err
	}
	return pl.draManager.ResourceClaims().GetPendingAllocation(claim.UID), nil
}

// useShared records claim i as allocated by another pod's in-flight
// allocation: only nodes that allocation's selector matches qualify.
func (d *stateData) useShared(i int, alloc *resourceapi.AllocationResult) error {
	if d.shared == nil {
		d.shared = map[int]*resourceapi.AllocationResult{}
	}
	d.shared[i] = alloc
	if alloc.NodeSelector != nil {
		sel, err := nodeaffinity.NewNodeSelector(alloc.NodeSelector)
		if err != nil {
			return fmt.Errorf("in-flight allocation's nodeSelector: %w", err)
		}
		d.availableOn[i] = sel
	}
	return nil
}
