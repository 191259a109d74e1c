package gputopology

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// PodGroupPostFilter: a pod's own claim allocated where the group cannot
// run is freed, in a group whose placements are chosen per topology
// domain too (else nothing frees it); claims others hold are left alone.
func TestPodGroupPostFilter(t *testing.T) {
	constrained := &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "nvidia.com/gpu.clique"}}}
	for _, tc := range []struct {
		name            string
		claim           *resourceapi.ResourceClaim
		constraints     *schedulingv1beta1.PodGroupSchedulingConstraints
		wantDeallocated bool
		wantMsg         string
	}{
		{"own claim allocated elsewhere: freed", claim("c", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj(), nil, true, "deallocation and deletion of ResourceClaims completed"},
		{"claim another pod holds: kept", claim("c", 1).Allocation(allocatedOn("node-a", "gpu-0")).ReservedForPod("other", types.UID("uid-other")).Obj(), nil, false, "deallocation and deletion of ResourceClaims completed"},
		{"topology-constrained group: its pod's own claim freed too", claim("c", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj(), constrained, true, "deallocation and deletion of ResourceClaims completed"},
		{"topology-constrained group: a claim another pod holds kept", claim("c", 1).Allocation(allocatedOn("node-a", "gpu-0")).ReservedForPod("other", types.UID("uid-other")).Obj(), constrained, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{claims: []*resourceapi.ResourceClaim{tc.claim}})
			env.pl.fts.EnableTopologyAwareWorkloadScheduling = true
			pod := podWithClaims("p", "c")
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
			stored, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			state.Write(stateKey, &groupState{pending: map[types.UID]bool{}, pods: map[types.NamespacedName]*stateData{
				{Namespace: ns, Name: "p"}: {claims: []*resourceapi.ResourceClaim{stored}, unavailable: map[int]bool{0: true}},
			}})
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-pg"}, Spec: schedulingv1beta1.PodGroupSpec{SchedulingConstraints: tc.constraints}}
			info := &framework.PodGroupInfo{Name: "job", Namespace: ns, UnscheduledPods: []*v1.Pod{pod}, PodGroup: pg}
			_, status := env.pl.PodGroupPostFilter(env.tCtx, state, info, nil)
			wantStatus(t, "PodGroupPostFilter", status, fwk.Unschedulable, tc.wantMsg)
			got, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if deallocated := got.Status.Allocation == nil; deallocated != tc.wantDeallocated {
				t.Errorf("claim deallocated: %v, want %v", deallocated, tc.wantDeallocated)
			}
		})
	}
}

// A claim two pods of the group share, unusable where it is, is freed
// once: a second write from the same read would conflict on a real API
// server, and an error would stop the group's PostFilter.
func TestPodGroupPostFilterFreesASharedClaimOnce(t *testing.T) {
	env := newTestEnv(t, objects{claims: []*resourceapi.ResourceClaim{claim("c", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj()}})
	stored, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	states := map[types.NamespacedName]*stateData{}
	for _, name := range []string{"p0", "p1"} {
		pod := podWithClaims(name, "c")
		pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
		pods = append(pods, pod)
		states[types.NamespacedName{Namespace: ns, Name: name}] = &stateData{claims: []*resourceapi.ResourceClaim{stored}, unavailable: map[int]bool{0: true}}
	}
	state := framework.NewCycleState()
	state.Write(stateKey, &groupState{pending: map[types.UID]bool{}, pods: states})
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-pg"}}
	env.client.ClearActions()
	_, status := env.pl.PodGroupPostFilter(env.tCtx, state, &framework.PodGroupInfo{Name: "job", Namespace: ns, UnscheduledPods: pods, PodGroup: pg}, nil)
	wantStatus(t, "PodGroupPostFilter", status, fwk.Unschedulable, "deallocation and deletion of ResourceClaims completed")
	updates := 0
	for _, a := range env.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d status updates of the shared claim, want 1", updates)
	}
}
