package gputopology

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
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
// once, and the second pod's own unusable claim is still freed (one
// claim a pod per call, as upstream's PostFilter frees one); in a
// group whose pods' claims leave it free to drop the PodGroup's
// reservations (DRAWorkloadResourceClaims, no topology constraint), the
// claims the pods freed are not written again: a second write from the
// same read would conflict on a real API server, and the error would
// stop the group's PostFilter.
func TestPodGroupPostFilterWritesEachClaimOnce(t *testing.T) {
	for _, workloadClaims := range []bool{false, true} {
		env := newTestEnv(t, objects{claims: []*resourceapi.ResourceClaim{
			claim("shared", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj(),
			claim("own", 1).Allocation(allocatedOn("node-a", "gpu-1")).Obj(),
		}})
		pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-pg"}}
		env.pl.fts.EnableDRAWorkloadResourceClaims = workloadClaims
		env.pl.fh = groupHandle{Handle: env.pl.fh, pg: pg}
		read := func(name string) *resourceapi.ResourceClaim {
			c, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		shared, own := read("shared"), read("own")
		var pods []*v1.Pod
		states := map[types.NamespacedName]*stateData{}
		// p0 frees the shared claim first; p1 then frees its own.
		for i, claims := range [][]*resourceapi.ResourceClaim{{shared}, {shared, own}, nil} {
			name := fmt.Sprintf("p%d", i)
			pod := podWithClaims(name)
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
			pods = append(pods, pod)
			unavailable := map[int]bool{}
			for i := range claims {
				unavailable[i] = true
			}
			states[types.NamespacedName{Namespace: ns, Name: name}] = &stateData{claims: claims, unavailable: unavailable}
		}
		state := framework.NewCycleState()
		state.Write(stateKey, &groupState{pending: map[types.UID]bool{}, pods: states})
		env.client.ClearActions()
		_, status := env.pl.PodGroupPostFilter(env.tCtx, state, &framework.PodGroupInfo{Name: "job", Namespace: ns, UnscheduledPods: pods, PodGroup: pg}, nil)
		if status.IsError() {
			t.Fatalf("workloadClaims %v: PodGroupPostFilter: %v", workloadClaims, status)
		}
		writes := map[string]int{}
		for _, a := range env.client.Actions() {
			if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
				writes[u.GetObject().(*resourceapi.ResourceClaim).Name]++
			}
		}
		if writes["shared"] != 1 || writes["own"] != 1 {
			t.Errorf("workloadClaims %v: status writes %v, want shared and own once each", workloadClaims, writes)
		}
	}
}

// groupHandle is the test framework's handle with a PodGroup that has no
// pod scheduled yet, as kube-scheduler's pod-group manager shows it.
type groupHandle struct {
	fwk.Handle
	pg *schedulingv1beta1.PodGroup
}

func (h groupHandle) PodGroupManager() fwk.PodGroupManager { return groupManager{} }

func (h groupHandle) SnapshotSharedLister() fwk.SharedLister {
	return groupLister{SharedLister: h.Handle.SnapshotSharedLister(), pg: h.pg}
}

type groupManager struct{ fwk.PodGroupManager }

func (m groupManager) PodGroupStates() fwk.PodGroupStateLister { return noneScheduled{} }

type groupLister struct {
	fwk.SharedLister
	pg *schedulingv1beta1.PodGroup
}

func (l groupLister) PodGroups() fwk.PodGroupLister { return l }

func (l groupLister) Get(_, _ string) (*schedulingv1beta1.PodGroup, error) { return l.pg, nil }

type noneScheduled struct{ fwk.PodGroupState }

func (noneScheduled) Get(_, _ string) (fwk.PodGroupState, error) { return noneScheduled{}, nil }

func (noneScheduled) ScheduledPodsCount() int { return 0 }

// In a group with a topology constraint, the PodGroup's own claim
// (DRAWorkloadResourceClaims) is left alone as upstream leaves it, so that
// another domain's placement may still use it, unless its binding failed
// or timed out: no placement can use it, and the group would otherwise
// wait until the PodGroup is recreated.
func TestPodGroupPostFilterFreesAConstrainedGroupsUnusableClaim(t *testing.T) {
	constrained := &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "nvidia.com/gpu.clique"}}}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-pg"}, Spec: schedulingv1beta1.PodGroupSpec{SchedulingConstraints: constrained}}
	groupClaim := func(binding bool, allocated time.Time) *resourceapi.ResourceClaim {
		alloc := allocatedOn("node-a", "gpu-0")
		alloc.AllocationTimestamp = &metav1.Time{Time: allocated}
		if binding {
			alloc.Devices.Results[0].BindingConditions = []string{"Attached"}
		}
		c := claim("group", 1).Allocation(alloc).Obj()
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "job", UID: "uid-pg"}}
		return c
	}
	for _, tc := range []struct {
		name            string
		claim           *resourceapi.ResourceClaim
		wantDeallocated bool
	}{
		{"binding timed out", groupClaim(true, time.Now().Add(-time.Hour)), true},
		{"binding within its timeout", groupClaim(true, time.Now()), false},
		{"no binding conditions", groupClaim(false, time.Now().Add(-time.Hour)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{claims: []*resourceapi.ResourceClaim{tc.claim}})
			env.pl.fts.EnableTopologyAwareWorkloadScheduling = true
			env.pl.fts.EnableDRAWorkloadResourceClaims = true
			env.pl.fh = groupHandle{Handle: env.pl.fh, pg: pg}
			stored, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, "group", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pod := podWithClaims("p")
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
			state := framework.NewCycleState()
			state.Write(stateKey, &groupState{pending: map[types.UID]bool{}, pods: map[types.NamespacedName]*stateData{
				{Namespace: ns, Name: "p"}: {claims: []*resourceapi.ResourceClaim{stored}, unavailable: map[int]bool{0: true}},
			}})
			info := &framework.PodGroupInfo{Name: "job", Namespace: ns, UnscheduledPods: []*v1.Pod{pod}, PodGroup: pg}
			if _, status := env.pl.PodGroupPostFilter(env.tCtx, state, info, nil); status.IsError() {
				t.Fatalf("PodGroupPostFilter: %v", status)
			}
			got, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, "group", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if deallocated := got.Status.Allocation == nil; deallocated != tc.wantDeallocated {
				t.Errorf("claim deallocated: %v, want %v", deallocated, tc.wantDeallocated)
			}
			if len(got.Status.ReservedFor) == 0 && !tc.wantDeallocated {
				t.Errorf("the PodGroup's reservation was dropped: %+v", got.Status)
			}
		})
	}
}

// As upstream, a pod of the group without claims counts: it had no claim
// to free, so the PodGroup's reservation of its claim is dropped for the
// next attempt to allocate it anew (DRAWorkloadResourceClaims, no
// topology constraint). Its PreFilter records it in the group's cycle.
func TestPodGroupPostFilterCountsPodsWithoutClaims(t *testing.T) {
	groupClaim := claim("group", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj()
	groupClaim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "job", UID: "uid-pg"}}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-pg"},
		Spec:       schedulingv1beta1.PodGroupSpec{ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("group")}}},
	}
	env := newTestEnv(t, objects{
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		claims:  []*resourceapi.ResourceClaim{groupClaim},
	})
	env.pl.fts.EnableDRAWorkloadResourceClaims = true
	env.pl.fh = groupHandle{Handle: env.pl.fh, pg: pg}
	pod := podWithClaims("p")
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
	group := framework.NewCycleState()
	cs := framework.NewCycleState()
	cs.SetPodGroupSchedulingCycle(group)
	if _, status := env.pl.PreFilter(env.tCtx, cs, pod, nil); status.IsError() {
		t.Fatalf("PreFilter: %v", status)
	}
	info := &framework.PodGroupInfo{Name: "job", Namespace: ns, UnscheduledPods: []*v1.Pod{pod}, PodGroup: pg}
	_, status := env.pl.PodGroupPostFilter(env.tCtx, group, info, nil)
	wantStatus(t, "PodGroupPostFilter", status, fwk.Unschedulable, "ResourceClaim unreserved for PodGroup")
	got, err := env.client.ResourceV1().ResourceClaims(ns).Get(env.tCtx, "group", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ReservedFor) != 0 {
		t.Errorf("the PodGroup's reservation was kept: %+v", got.Status.ReservedFor)
	}
}
