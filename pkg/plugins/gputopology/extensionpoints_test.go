package gputopology

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cgotesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/plugins/normalize"
)

// wantStatus compares a status by code and a part of its message.
func wantStatus(t *testing.T, what string, got *fwk.Status, code fwk.Code, msg string) {
	t.Helper()
	if got.Code() != code || !strings.Contains(got.Message(), msg) {
		t.Errorf("%s: status %v %q, want %v containing %q", what, got.Code(), got.Message(), code, msg)
	}
}

func TestPreEnqueue(t *testing.T) {
	deleting := claim("deleting", 1).Obj()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{resourceapi.Finalizer}
	// A claim of PodGroup.spec.resourceClaims (DRAWorkloadResourceClaims),
	// which the resourceclaim controller maps into the pod's status.
	groupClaim := claim("train-gpus", 4).Obj()
	groupClaim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "train", UID: "uid-pg", Controller: ptr.To(true)}}
	groupPod := st.MakePod().Name("p").Namespace(ns).UID("uid-pod-p").
		PodResourceClaims(v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpus")}).Obj()
	groupPod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("train-gpus")}}
	groupPod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	otherGroupPod := groupPod.DeepCopy()
	otherGroupPod.Spec.SchedulingGroup.PodGroupName = ptr.To("eval")
	for _, tc := range []struct {
		name           string
		pod            *v1.Pod
		workloadClaims bool // DRAWorkloadResourceClaims
		code           fwk.Code
		msg            string
	}{
		{"no claims", podWithClaims("p"), false, fwk.Success, ""},
		{"claim exists", podWithClaims("p", "c"), false, fwk.Success, ""},
		{"claim not created yet", podWithClaims("p", "missing"), false, fwk.UnschedulableAndUnresolvable, "resourceclaim default/missing"},
		{"claim being deleted", podWithClaims("p", "deleting"), false, fwk.UnschedulableAndUnresolvable, "is being deleted"},
		{"pod-group claim, gate off", groupPod, false, fwk.UnschedulableAndUnresolvable, "resourceclaim default/train-gpus belongs to PodGroup train: the scheduler runs without the DRAWorkloadResourceClaims feature gate"},
		{"pod-group claim", groupPod, true, fwk.Success, ""},
		{"another group's claim", otherGroupPod, true, fwk.UnschedulableAndUnresolvable, "train-gpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{claims: []*resourceapi.ResourceClaim{claim("c", 1).Obj(), deleting, groupClaim}})
			env.pl.fts.EnableDRAWorkloadResourceClaims = tc.workloadClaims
			wantStatus(t, "PreEnqueue", env.pl.PreEnqueue(env.tCtx, tc.pod), tc.code, tc.msg)
		})
	}
}

func TestPreFilter(t *testing.T) {
	allocated := claim("allocated", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj()
	shared := claim("shared", 1).Allocation(allocatedOn("node-a", "gpu-1")).
		ReservedForPod("other", types.UID("uid-other")).Obj()
	otherClass := claim("other-class", 1).Obj()
	otherClass.Spec.Devices.Requests[0].Exactly.DeviceClassName = "nonexistent.example.com"
	firstAvailable := claim("first-available", 1).Obj()
	firstAvailable.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "gpus", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "one", DeviceClassName: contract.ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}
	for _, tc := range []struct {
		name               string
		pod                *v1.Pod
		prioritizedListOff bool
		code               fwk.Code
		msg                string
		wantSession        bool
	}{
		{name: "no claims: a session that only measures fragmentation", pod: podWithClaims("p"), code: fwk.Success, wantSession: true},
		{name: "claim to allocate", pod: podWithClaims("p", "c"), code: fwk.Success, wantSession: true},
		{name: "allocated claim: nothing to allocate", pod: podWithClaims("p", "allocated"), code: fwk.Success},
		{name: "missing class", pod: podWithClaims("p", "other-class"), code: fwk.UnschedulableAndUnresolvable, msg: "device class nonexistent.example.com does not exist"},
		{name: "allocated claim another pod uses: shared", pod: podWithClaims("p", "shared"), code: fwk.Success},
		{name: "subrequests with DRAPrioritizedList off", pod: podWithClaims("p", "first-available"), prioritizedListOff: true, code: fwk.UnschedulableAndUnresolvable, msg: "resourceclaim default/first-available, request gpus: has subrequests, but the DRAPrioritizedList feature is disabled"},
		{name: "subrequests with DRAPrioritizedList on", pod: podWithClaims("p", "first-available"), code: fwk.Success, wantSession: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{
				classes: []*resourceapi.DeviceClass{gpuClass},
				slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
				claims:  []*resourceapi.ResourceClaim{claim("c", 2).Obj(), allocated, shared, otherClass, firstAvailable},
			})
			env.pl.fts.EnableDRAPrioritizedList = !tc.prioritizedListOff
			_, status := env.pl.PreFilter(env.tCtx, env.state, tc.pod, nil)
			wantStatus(t, "PreFilter", status, tc.code, tc.msg)
			if s, err := getState(env.state); err != nil {
				t.Errorf("no state written: %v", err)
			} else if (s.session != nil) != tc.wantSession {
				t.Errorf("session %v, want one: %v", s.session, tc.wantSession)
			}
		})
	}
}

// A claim another pod is being scheduled with is out of reach until its
// allocation is written; no eviction can change that (unresolvable).
func TestPreFilterClaimInFlightForAnotherPod(t *testing.T) {
	env := newTestEnv(t, objects{
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("c", 1).Obj()},
	})
	c := env.storedClaim("c")
	c.Status.Allocation = allocatedOn("node-a", "gpu-0")
	if err := env.pl.draManager.ResourceClaims().SignalClaimPendingAllocation(c.UID, c); err != nil {
		t.Fatal(err)
	}
	_, status := env.pl.PreFilter(env.tCtx, env.state, podWithClaims("p", "c"), nil)
	wantStatus(t, "PreFilter", status, fwk.UnschedulableAndUnresolvable, "is being allocated for another pod")
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		node        string
		code        fwk.Code
		msg         string
		wantDevices []string
	}{
		{name: "NVLink pair chosen over the first two GPUs", pod: podWithClaims("p", "two"), node: "node-a", code: fwk.Success, wantDevices: []string{"gpu-0", "gpu-2"}},
		{name: "node without devices", pod: podWithClaims("p", "two"), node: "node-empty", code: fwk.UnschedulableAndUnresolvable, msg: "cannot allocate all claims"},
		{name: "claim allocated on another node", pod: podWithClaims("p", "on-b"), node: "node-a", code: fwk.UnschedulableAndUnresolvable, msg: "resourceclaim default/on-b is allocated on other nodes"},
		{name: "already allocated claim on its node", pod: podWithClaims("p", "on-b"), node: "node-b", code: fwk.Success},
		{name: "allocation skipping node operations on a node that does not declare it", pod: podWithClaims("p", "skip-on-b"), node: "node-b", code: fwk.UnschedulableAndUnresolvable, msg: "resourceclaim default/skip-on-b is allocated on devices that skip node operations, which the node does not declare"},
		{name: "allocation skipping node operations on a node that declares it", pod: podWithClaims("p", "skip-on-d"), node: "node-d", code: fwk.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			declares := node("node-d")
			declares.Status.DeclaredFeatures = []string{draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate}
			env := newTestEnv(t, objects{
				nodes:   []*v1.Node{node("node-a"), node("node-b"), node("node-empty"), declares},
				classes: []*resourceapi.DeviceClass{gpuClass},
				slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4), pairSlice("node-b", 4), pairSlice("node-d", 4)},
				claims: []*resourceapi.ResourceClaim{
					claim("two", 2).Obj(),
					claim("on-b", 1).Allocation(allocatedOn("node-b", "gpu-0")).Obj(),
					claim("skip-on-b", 1).Allocation(skippingNodeOperations(allocatedOn("node-b", "gpu-1"))).Obj(),
					claim("skip-on-d", 1).Allocation(skippingNodeOperations(allocatedOn("node-d", "gpu-0"))).Obj(),
				},
			})
			if _, status := env.pl.PreFilter(env.tCtx, env.state, tc.pod, nil); !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
			wantStatus(t, "Filter", env.pl.Filter(env.tCtx, env.state, tc.pod, env.nodes[tc.node]), tc.code, tc.msg)
			if tc.wantDevices == nil {
				return
			}
			s, _ := getState(env.state)
			res := s.result(tc.node)
			if res == nil {
				t.Fatal("no result kept for Score and Reserve")
			}
			var got []string
			for _, r := range res.Allocations[0].Devices.Results {
				got = append(got, r.Device)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantDevices) {
				t.Errorf("devices %v, want %v", got, tc.wantDevices)
			}
		})
	}
}

// skippingNodeOperations marks the allocation's devices as skipping the
// kubelet's prepare and unprepare (DRAOptionalNodeOperations).
func skippingNodeOperations(a *resourceapi.AllocationResult) *resourceapi.AllocationResult {
	for i := range a.Devices.Results {
		a.Devices.Results[i].SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
	}
	return a
}

// Score prefers the node whose allocation has the better link class, and
// normalizes onto the framework's range.
func TestScore(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("nvlink"), node("pcie")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("nvlink", 4), pcieSlice("pcie", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("two", 2).Obj()},
	})
	pod := podWithClaims("p", "two")
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	var scores fwk.NodeScoreList
	for _, n := range []string{"nvlink", "pcie"} {
		if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes[n]); !status.IsSuccess() {
			t.Fatalf("Filter %s: %v", n, status)
		}
		score, status := env.pl.Score(env.tCtx, env.state, pod, env.nodes[n])
		if !status.IsSuccess() {
			t.Fatalf("Score %s: %v", n, status)
		}
		scores = append(scores, fwk.NodeScore{Name: n, Score: score})
	}
	if status := env.pl.ScoreExtensions().NormalizeScore(env.tCtx, env.state, pod, scores); !status.IsSuccess() {
		t.Fatal(status)
	}
	if scores[0].Score != fwk.MaxScore || scores[1].Score >= scores[0].Score || scores[1].Score < fwk.MinScore {
		t.Errorf("scores %v, want nvlink at %d and pcie below it", scores, fwk.MaxScore)
	}
}

// PreScore skips pods without claims for every rating but Packing's: a
// measurement takes no device, so its link and MIG ratings are the same
// on every node (checked here on a node with a GPU in use, a free one, a
// MIG GPU with a partition in use and one without devices), and skipping
// them leaves the ranking as it was.
func TestPreScore(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("nvlink"), node("pcie"), node("mig"), node("cpu-node")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  append([]*resourceapi.ResourceSlice{pairSlice("nvlink", 4), pcieSlice("pcie", 4)}, migSlices("mig")...),
		claims: []*resourceapi.ResourceClaim{
			claim("two", 2).Obj(),
			claim("held", 1).Allocation(allocatedOn("nvlink", "gpu-0")).Obj(),
			claim("partition", 1).Allocation(allocatedOn("mig", "gpu-0-mig-1g10gb-2")).Obj(),
		},
	})
	mig := NewQualityScorer("mig", allocator.Quality.MIGScore, normalize.MinMax, false)
	packing := NewQualityScorer("packing", allocator.Quality.PackingScore, normalize.Clamp, true)
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		wantSkip bool
	}{
		{"pod with claims", podWithClaims("p", "two"), false},
		{"pod without claims", podWithClaims("q"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := framework.NewCycleState()
			if _, status := env.pl.PreFilter(env.tCtx, cs, tc.pod, nil); !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
			want := fwk.Success
			if tc.wantSkip {
				want = fwk.Skip
			}
			wantStatus(t, "GPUTopology PreScore", env.pl.PreScore(env.tCtx, cs, tc.pod, nil), want, "")
			wantStatus(t, "MIG PreScore", mig.PreScore(env.tCtx, cs, tc.pod, nil), want, "")
			wantStatus(t, "Packing PreScore", packing.PreScore(env.tCtx, cs, tc.pod, nil), fwk.Success, "")
			if !tc.wantSkip {
				return
			}
			for _, n := range []string{"nvlink", "pcie", "mig", "cpu-node"} {
				if status := env.pl.Filter(env.tCtx, cs, tc.pod, env.nodes[n]); !status.IsSuccess() {
					t.Fatalf("Filter %s: %v", n, status)
				}
				q, ok := NodeQuality(cs, n)
				if !ok || q.TopologyScore() != 100 || q.MIGScore() != 100 {
					t.Errorf("%s: measured %v, link rating %v, MIG rating %v; want 100 and 100 on every node", n, ok, q.TopologyScore(), q.MIGScore())
				}
			}
		})
	}
}

// scheduleUpTo runs PreFilter and Filter for the pod on node and
// requires both to pass.
func (e *testEnv) scheduleUpTo(pod *v1.Pod, nodeName string) fwk.CycleState {
	e.tCtx.Helper()
	cs := framework.NewCycleState()
	if _, status := e.pl.PreFilter(e.tCtx, cs, pod, nil); !status.IsSuccess() {
		e.tCtx.Fatalf("PreFilter %s: %v", pod.Name, status)
	}
	if status := e.pl.Filter(e.tCtx, cs, pod, e.nodes[nodeName]); !status.IsSuccess() {
		e.tCtx.Fatalf("Filter %s: %v", pod.Name, status)
	}
	return cs
}

// inGroupCycle runs the pod's PreFilter and Filter on node in the
// pod-group cycle group (nil: none) and returns its cycle state.
func (e *testEnv) inGroupCycle(group *framework.CycleState, pod *v1.Pod, nodeName string) *framework.CycleState {
	e.tCtx.Helper()
	cs := framework.NewCycleState()
	if group != nil {
		cs.SetPodGroupSchedulingCycle(group)
	}
	if _, status := e.pl.PreFilter(e.tCtx, cs, pod, nil); !status.IsSuccess() {
		e.tCtx.Fatalf("PreFilter %s: %v", pod.Name, status)
	}
	if status := e.pl.Filter(e.tCtx, cs, pod, e.nodes[nodeName]); !status.IsSuccess() {
		e.tCtx.Fatalf("Filter %s: %v", pod.Name, status)
	}
	return cs
}

// bindOn runs the pod's cycle through Reserve and PreBind on node and
// requires each step to pass: its claims are then written.
func (e *testEnv) bindOn(pod *v1.Pod, nodeName string) {
	e.tCtx.Helper()
	cs := e.scheduleUpTo(pod, nodeName)
	if status := e.pl.Reserve(e.tCtx, cs, pod, nodeName); !status.IsSuccess() {
		e.tCtx.Fatalf("Reserve %s: %v", pod.Name, status)
	}
	if status := e.pl.PreBind(e.tCtx, cs, pod, nodeName); !status.IsSuccess() {
		e.tCtx.Fatalf("PreBind %s: %v", pod.Name, status)
	}
}

// Reserve puts the devices in flight in the shared claim tracker, where
// the next pod's PreFilter sees them as taken; Unreserve gives them back.
func TestReserveUnreserve(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 2)},
		claims:  []*resourceapi.ResourceClaim{claim("first", 2).Obj(), claim("second", 1).Obj()},
	})
	first, second := podWithClaims("first", "first"), podWithClaims("second", "second")
	cs := env.scheduleUpTo(first, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, first, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	uid := env.storedClaim("first").UID
	if env.pl.draManager.ResourceClaims().GetPendingAllocation(uid) == nil {
		t.Fatal("Reserve: no in-flight allocation in the claim tracker")
	}
	cs2 := framework.NewCycleState()
	if _, status := env.pl.PreFilter(env.tCtx, cs2, second, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter second: %v", status)
	}
	wantStatus(t, "Filter of a pod while the node's GPUs are in flight", env.pl.Filter(env.tCtx, cs2, second, env.nodes["node-a"]), fwk.UnschedulableAndUnresolvable, "cannot allocate all claims")

	env.pl.Unreserve(env.tCtx, cs, first, "node-a")
	if env.pl.draManager.ResourceClaims().GetPendingAllocation(uid) != nil {
		t.Error("Unreserve: allocation still in flight")
	}
	env.scheduleUpTo(second, "node-a")
}

// PreBind writes the allocation, the finalizer, the pod's reservation and
// the placement note in the claim, and the claim is in flight no longer.
func TestPreBind(t *testing.T) {
	env := fourGPUNode(t, claim("two", 2).Obj())
	pod := podWithClaims("p", "two")
	allocated := allocationsObserved(t)
	cs := env.scheduleUpTo(pod, "node-a")
	if n := allocationsObserved(t) - allocated; n != 1 {
		t.Errorf("Filter's allocation counted %d times in the allocation latency, want 1", n)
	}
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if _, status := env.pl.PreBindPreFlight(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBindPreFlight: %v", status)
	}
	if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBind: %v", status)
	}
	c := env.storedClaim("two")
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 2 || c.Status.Allocation.AllocationTimestamp == nil {
		t.Errorf("allocation %+v, want 2 devices and a timestamp", c.Status.Allocation)
	}
	if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != pod.UID {
		t.Errorf("reservedFor %+v, want the pod", c.Status.ReservedFor)
	}
	if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
		t.Errorf("finalizers %v, want %s", c.Finalizers, resourceapi.Finalizer)
	}
	if note := c.Annotations[PlacementAnnotation]; !strings.Contains(note, "link class nvlink") {
		t.Errorf("placement note %q, want the link class", note)
	}
	if env.pl.draManager.ResourceClaims().GetPendingAllocation(c.UID) != nil {
		t.Error("claim still in flight after PreBind")
	}
}

// A claim written in PreBind leaves the in-flight set at once: when a
// later claim's write fails, Unreserve must not restore the informer's
// older copy of the written one, which would show its devices free until
// the watch delivers the write.
func TestPreBindPartialWrite(t *testing.T) {
	env := fourGPUNode(t, claim("first", 1).Obj(), claim("second", 1).Obj())
	env.client.PrependReactor("update", "resourceclaims", func(a cgotesting.Action) (bool, apiruntime.Object, error) {
		if u, ok := a.(cgotesting.UpdateAction); ok && a.GetSubresource() == "status" && u.GetObject().(*resourceapi.ResourceClaim).Name == "second" {
			return true, nil, errors.New("injected: etcd unavailable")
		}
		return false, nil, nil
	})
	pod := podWithClaims("p", "first", "second")
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	wantStatus(t, "PreBind with the second write failing", env.pl.PreBind(env.tCtx, cs, pod, "node-a"), fwk.Error, "injected")
	first := env.storedClaim("first")
	if first.Status.Allocation == nil {
		t.Fatal("the first claim's allocation was not written")
	}
	claims := env.pl.draManager.ResourceClaims()
	if claims.GetPendingAllocation(first.UID) != nil {
		t.Error("the written claim is still in flight: Unreserve would restore its unallocated copy")
	}
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	if got, err := claims.Get(ns, "first"); err != nil || got.Status.Allocation == nil {
		t.Errorf("after Unreserve the scheduler's copy of the written claim is %+v (%v), want its allocation", got, err)
	}
}

// A status write that took effect but whose answer was lost (a timeout):
// PreBind reads the claim back, finds what it wrote and goes on. Taken as
// failed, the claim's devices would leave the in-flight set and, until
// the watch delivered the write, look free to the next pod.
func TestPreBindWriteWhoseAnswerWasLost(t *testing.T) {
	env := fourGPUNode(t, claim("c1", 1).Obj(), claim("c2", 1).Obj())
	gvr := resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	lost := false
	env.client.PrependReactor("update", "resourceclaims", func(a cgotesting.Action) (bool, apiruntime.Object, error) {
		obj := a.(cgotesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim)
		if lost || a.GetSubresource() != "status" || obj.Name != "c2" {
			return false, nil, nil
		}
		lost = true
		if err := env.client.Tracker().Update(gvr, obj, ns); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
	})
	pod := podWithClaims("p", "c1", "c2")
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBind with c2's answer lost: %v", status)
	}
	if !lost {
		t.Fatal("c2's write was not intercepted")
	}
	if got, err := env.pl.draManager.ResourceClaims().Get(ns, "c2"); err != nil || got.Status.Allocation == nil {
		t.Errorf("the scheduler's copy of c2 is %+v (%v), want its allocation", got, err)
	}
}

// A claim deleted and made again under the same name between Reserve and
// PreBind is not written: the allocation was made for the old claim's
// requests. PreBind fails, and Unreserve drops the old claim's in-flight
// devices (keyed by its UID), which would otherwise stay taken for as long
// as the scheduler runs.
func TestPreBindRecreatedClaim(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 2)},
		claims:  []*resourceapi.ResourceClaim{claim("c", 1).Obj()},
	})
	pod := podWithClaims("p", "c")
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	oldUID := env.storedClaim("c").UID
	claims := env.client.ResourceV1().ResourceClaims(ns)
	if err := claims.Delete(env.tCtx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Create(env.tCtx, claim("c", 1).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if env.storedClaim("c").UID == oldUID {
		t.Fatal("the recreated claim kept its UID")
	}
	// As the API server: an update of the old object conflicts.
	gvr := resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	env.client.PrependReactor("update", "resourceclaims", func(a cgotesting.Action) (bool, apiruntime.Object, error) {
		obj := a.(cgotesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim)
		if stored, err := env.client.Tracker().Get(gvr, ns, obj.Name); err == nil && stored.(*resourceapi.ResourceClaim).UID != obj.UID {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), obj.Name, errors.New("UID precondition"))
		}
		return false, nil, nil
	})
	wantStatus(t, "PreBind of a recreated claim", env.pl.PreBind(env.tCtx, cs, pod, "node-a"), fwk.Error, "deleted and made again")
	if c := env.storedClaim("c"); c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 {
		t.Errorf("the recreated claim was written: %+v", c.Status)
	}
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	if env.pl.draManager.ResourceClaims().GetPendingAllocation(oldUID) != nil {
		t.Error("the old claim's devices are still in flight after Unreserve")
	}
}

// A claim the pod was placed for as allocated on its node, freed and
// allocated on another node before the pod's PreBind (a pod sharing it
// failed there, its PostFilter freed it): the conflict's fresh copy is not
// reserved for the pod, which would be bound to a node its devices are
// not on.
func TestPreBindClaimAllocatedAnewElsewhere(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a"), node("node-b")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4), pairSlice("node-b", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("x", 1).Allocation(allocatedOn("node-a", "gpu-0")).Obj()},
	})
	env.refuseStaleClaimUpdates()
	pod := podWithClaims("p", "x")
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	again := env.storedClaim("x")
	again.Status.Allocation = allocatedOn("node-b", "gpu-1")
	again.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "q", UID: "uid-pod-q"}}
	if _, err := env.client.ResourceV1().ResourceClaims(ns).UpdateStatus(env.tCtx, again, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "PreBind on node-a", env.pl.PreBind(env.tCtx, cs, pod, "node-a"), fwk.Error, "resourceclaim default/x got allocated elsewhere in the meantime")
	if c := env.storedClaim("x"); len(c.Status.ReservedFor) != 1 {
		t.Errorf("reserved for %v, want q alone", c.Status.ReservedFor)
	}
}

// PreBind stamps a new allocation's time as the in-tree plugin does, only
// while binding conditions are on; an allocation made elsewhere is left as
// it is (the API server refuses changes to it).
func TestPreBindAllocationTimestamp(t *testing.T) {
	for _, tc := range []struct {
		name              string
		allocated         bool
		bindingConditions bool
	}{
		{"new allocation", false, true},
		{"allocated elsewhere without a timestamp", true, true},
		{"new allocation, binding conditions off", false, false},
		{"allocated elsewhere without a timestamp, binding conditions off", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.bindingConditions {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceBindingConditions, false)
			}
			c := claim("two", 2)
			if tc.allocated {
				c = c.Allocation(allocatedOn("node-a", "gpu-0", "gpu-2"))
			}
			env := newTestEnv(t, objects{
				nodes:   []*v1.Node{node("node-a")},
				classes: []*resourceapi.DeviceClass{gpuClass},
				slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
				claims:  []*resourceapi.ResourceClaim{c.Obj()},
			})
			pod := podWithClaims("p", "two")
			cs := env.scheduleUpTo(pod, "node-a")
			if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
				t.Fatalf("Reserve: %v", status)
			}
			if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
				t.Fatalf("PreBind: %v", status)
			}
			got := env.storedClaim("two")
			if got.Status.Allocation == nil || len(got.Status.ReservedFor) != 1 {
				t.Fatalf("status %+v, want allocated and reserved for the pod", got.Status)
			}
			want := tc.bindingConditions && !tc.allocated
			if stamped := got.Status.Allocation.AllocationTimestamp != nil; stamped != want {
				t.Errorf("allocation timestamp written: %v, want %v", stamped, want)
			}
		})
	}
}

// A pod without claims is measured on every node (its CPU may strand
// GPUs) but never refused, never reserves anything and skips PreBind.
func TestPodsWithoutClaims(t *testing.T) {
	env := newTestEnv(t, objects{nodes: []*v1.Node{node("node-a"), node("cpu-node")}, classes: []*resourceapi.DeviceClass{gpuClass},
		slices: []*resourceapi.ResourceSlice{pairSlice("node-a", 4)}})
	pod := podWithClaims("p")
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v, want Success", status)
	}
	if s, err := getState(env.state); err != nil || !s.measureOnly {
		t.Fatalf("state %+v, %v: want a measuring session", s, err)
	}
	allocated := allocationsObserved(t)
	if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes["node-a"]); !status.IsSuccess() {
		t.Errorf("Filter: %v, want Success", status)
	}
	if _, ok := NodeQuality(env.state, "node-a"); !ok {
		t.Error("no fragmentation measured on node-a")
	}
	if n := allocationsObserved(t) - allocated; n != 0 {
		t.Errorf("a measurement counted %d times in the allocation latency, want 0", n)
	}
	// A node without devices: nothing changes there, the score of "no
	// change".
	if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes["cpu-node"]); !status.IsSuccess() {
		t.Errorf("Filter on cpu-node: %v, want Success", status)
	}
	if q, ok := NodeQuality(env.state, "cpu-node"); !ok || q.PackingScore() != 50 {
		t.Errorf("cpu-node: measured %v, packing score %v; want 50", ok, q.PackingScore())
	}
	_, status := env.pl.PreBindPreFlight(env.tCtx, env.state, pod, "node-a")
	wantStatus(t, "PreBindPreFlight", status, fwk.Skip, "")
	if status := env.pl.Reserve(env.tCtx, env.state, pod, "node-b"); !status.IsSuccess() {
		t.Errorf("Reserve of a pod without claims on a node Filter did not see: %v", status)
	}
}

// TestPodsWithoutClaimsNoSlices: where no ResourceSlice exists every
// node would measure the same, so a pod without claims is skipped, as the
// in-tree plugin skips it.
func TestPodsWithoutClaimsNoSlices(t *testing.T) {
	env := newTestEnv(t, objects{nodes: []*v1.Node{node("node-a")}, classes: []*resourceapi.DeviceClass{gpuClass}})
	pod := podWithClaims("p")
	_, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil)
	wantStatus(t, "PreFilter", status, fwk.Skip, "")
	if s, err := getState(env.state); err != nil || s.measureOnly || s.session != nil {
		t.Errorf("state %+v, %v: want an empty one", s, err)
	}
	if status := env.pl.Reserve(env.tCtx, env.state, pod, "node-a"); !status.IsSuccess() {
		t.Errorf("Reserve: %v", status)
	}
}

// unreadableSlices is a DRA manager whose ResourceSlices cannot be listed.
type unreadableSlices struct{ fwk.SharedDRAManager }

func (unreadableSlices) ResourceSlices() fwk.ResourceSliceLister { return unreadableSlices{} }
func (unreadableSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return nil, errors.New("slice tracker not synced")
}

// A pod without claims is placed even when the devices cannot be read:
// it needs none, so it is skipped as the in-tree plugin skips it, not
// failed; a pod with claims gets the error.
func TestPodsWithoutClaimsUnreadableSlices(t *testing.T) {
	env := newTestEnv(t, objects{nodes: []*v1.Node{node("node-a")}, classes: []*resourceapi.DeviceClass{gpuClass},
		slices: []*resourceapi.ResourceSlice{pairSlice("node-a", 4)}, claims: []*resourceapi.ResourceClaim{claim("one", 1).Obj()}})
	env.pl.draManager = unreadableSlices{env.pl.draManager}
	_, status := env.pl.PreFilter(env.tCtx, env.state, podWithClaims("p"), nil)
	wantStatus(t, "PreFilter of a pod without claims", status, fwk.Skip, "")
	_, status = env.pl.PreFilter(env.tCtx, framework.NewCycleState(), podWithClaims("q", "one"), nil)
	wantStatus(t, "PreFilter of a pod with a claim", status, fwk.Error, "slice tracker not synced")
}

// allocationsObserved is the count of successful allocations in the
// allocation latency histogram.
func allocationsObserved(t *testing.T) uint64 {
	t.Helper()
	registerMetrics()
	n, err := testutil.GetHistogramMetricCount(allocationDuration.WithLabelValues("allocated"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// PostFilter deallocates a claim allocated where the pod cannot run when
// nobody uses it, so that the next attempt may allocate it elsewhere.
func TestPostFilterDeallocatesUnusableClaim(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4), pairSlice("node-b", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("on-b", 1).Allocation(allocatedOn("node-b", "gpu-0")).Obj()},
	})
	pod := podWithClaims("p", "on-b")
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	wantStatus(t, "Filter", env.pl.Filter(env.tCtx, env.state, pod, env.nodes["node-a"]), fwk.UnschedulableAndUnresolvable, "allocated on other nodes")
	_, status := env.pl.PostFilter(env.tCtx, env.state, pod, nil)
	wantStatus(t, "PostFilter", status, fwk.Unschedulable, "deallocation of ResourceClaim completed")
	if c := env.storedClaim("on-b"); c.Status.Allocation != nil {
		t.Errorf("claim still allocated: %+v", c.Status.Allocation)
	}
}

// Every claim unusable on the node is found, as upstream finds them, so
// that PostFilter frees one nobody holds even when an earlier one is in
// use by another pod: otherwise the pod would wait forever. But none is
// marked where the pod's other claims cannot be allocated either (the
// pod would not fit there anyway).
func TestFilterFindsEveryUnusableClaim(t *testing.T) {
	held := claim("held", 1).Allocation(allocatedOn("node-b", "gpu-0")).Obj()
	held.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "q", UID: "uid-q"}}
	for _, tc := range []struct {
		name       string
		claims     []string
		deallocate string // "" for none
	}{
		{"held first, idle second", []string{"held", "idle"}, "idle"},
		{"idle, and a claim no node can allocate", []string{"idle", "nine"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{
				nodes:   []*v1.Node{node("node-a")},
				classes: []*resourceapi.DeviceClass{gpuClass},
				slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4), pairSlice("node-b", 4), pairSlice("node-c", 4)},
				claims: []*resourceapi.ResourceClaim{held.DeepCopy(), claim("idle", 1).Allocation(allocatedOn("node-c", "gpu-0")).Obj(),
					claim("nine", 9).Obj()},
			})
			pod := podWithClaims("p", tc.claims...)
			if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
			if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes["node-a"]); status.Code() != fwk.UnschedulableAndUnresolvable {
				t.Fatalf("Filter: %v, want unresolvable", status)
			}
			_, status := env.pl.PostFilter(env.tCtx, env.state, pod, nil)
			for _, name := range []string{"held", "idle"} {
				freed := env.storedClaim(name).Status.Allocation == nil
				if want := name == tc.deallocate; freed != want {
					t.Errorf("claim %s deallocated: %v, want %v (PostFilter: %v)", name, freed, want, status)
				}
			}
		})
	}
}

// A pod PreFilter rejected before reading its claims (one does not exist)
// has nothing to free: PostFilter says Unschedulable, not an error, which
// would end PostFilter before DefaultPreemption and fill the pod's
// condition with a missing state.
func TestPostFilterAfterAnEarlyRejection(t *testing.T) {
	env := newTestEnv(t, objects{nodes: []*v1.Node{node("node-a")}, classes: []*resourceapi.DeviceClass{gpuClass}})
	pod := podWithClaims("p", "missing")
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); status.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter: %v, want the missing claim unresolvable", status)
	}
	_, status := env.pl.PostFilter(env.tCtx, env.state, pod, nil)
	wantStatus(t, "PostFilter", status, fwk.Unschedulable, "")
}

func TestQueueingHints(t *testing.T) {
	env := newTestEnv(t, objects{claims: []*resourceapi.ResourceClaim{claim("mine", 1).Obj(), claim("other", 1).Obj()}})
	mine, other := env.storedClaim("mine"), env.storedClaim("other")
	allocated := mine.DeepCopy()
	allocated.Status.Allocation = allocatedOn("node-a", "gpu-0")
	reserved := allocated.DeepCopy()
	reserved.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "x", UID: "uid-x"}}
	otherAllocated := other.DeepCopy()
	otherAllocated.Status.Allocation = allocatedOn("node-a", "gpu-1")
	pod := podWithClaims("p", "mine")
	for _, tc := range []struct {
		name     string
		old, new any
		want     fwk.QueueingHint
	}{
		{"own claim created", nil, mine, fwk.Queue},
		{"own claim's status changed", allocated, reserved, fwk.Queue},
		{"own claim changed but not its status", mine, mine.DeepCopy(), fwk.QueueSkip},
		{"another claim created", nil, other, fwk.QueueSkip},
		{"another claim deallocated: devices freed", otherAllocated, other, fwk.Queue},
		{"allocated claim deleted: devices freed", otherAllocated, nil, fwk.Queue},
		{"unallocated claim deleted", other, nil, fwk.QueueSkip},
		{"deletion seen late", cache.DeletedFinalStateUnknown{Key: "default/other", Obj: other}, nil, fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := env.pl.isSchedulableAfterClaimChange(env.tCtx.Logger(), pod, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	// As upstream: a pod still waiting for its own claim to be created
	// gains nothing from devices freed.
	if got, err := env.pl.isSchedulableAfterClaimChange(env.tCtx.Logger(), podWithClaims("p", "missing"), otherAllocated, other); err != nil || got != fwk.QueueSkip {
		t.Errorf("another claim deallocated, own claim missing: hint %v, %v; want QueueSkip", got, err)
	}
	t.Run("unexpected object", func(t *testing.T) {
		if got, err := env.pl.isSchedulableAfterClaimChange(env.tCtx.Logger(), pod, nil, pod); err == nil || got != fwk.Queue {
			t.Errorf("hint %v, %v; want Queue and an error", got, err)
		}
	})
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want fwk.QueueingHint
	}{
		{"pod's claims exist now", podWithClaims("p", "mine"), fwk.Queue},
		{"pod's claim still missing", podWithClaims("p", "missing"), fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := env.pl.isSchedulableAfterPodUpdate(env.tCtx.Logger(), tc.pod, tc.pod, tc.pod)
			if err != nil || got != tc.want {
				t.Errorf("hint %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// The scheduler reports a pod whose binding failed as an assigned pod
// deleted: waiting pods are queued when it held devices only in memory,
// not when its claims are allocated and reserved for it (their
// deallocation is a claim event).
func TestQueueingHintAssignedPodDelete(t *testing.T) {
	bound := podWithClaims("bound", "held")
	held := claim("held", 1).Obj()
	held.Status.Allocation = allocatedOn("node-a", "gpu-0")
	held.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{podBinding(bound)}
	notReserved := claim("not-reserved", 1).Obj()
	notReserved.Status.Allocation = allocatedOn("node-a", "gpu-1")
	env := newTestEnv(t, objects{
		classes: []*resourceapi.DeviceClass{extendedGPUClass},
		claims:  []*resourceapi.ResourceClaim{held, notReserved, claim("unallocated", 1).Obj()},
	})
	extendedMapped := extendedGPUPod("ext-mapped", 1)
	extendedMapped.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "held"}
	waiting := podWithClaims("waiting", "unallocated")
	completed := podWithClaims("completed", "deleted")
	completed.Status.Phase = v1.PodSucceeded
	for _, tc := range []struct {
		name string
		gone any
		want fwk.QueueingHint
	}{
		{"pod without devices", st.MakePod().Name("cpu").Namespace(ns).Obj(), fwk.QueueSkip},
		{"claims allocated and reserved: a claim event follows", bound, fwk.QueueSkip},
		{"claim not yet written", podWithClaims("failed", "unallocated"), fwk.Queue},
		{"claim allocated, not reserved for it", podWithClaims("failed", "not-reserved"), fwk.Queue},
		{"claim gone", podWithClaims("failed", "deleted"), fwk.Queue},
		{"extended resources, claim not yet created", extendedGPUPod("ext", 1), fwk.Queue},
		{"extended resources, claim reserved for another pod", extendedMapped, fwk.Queue},
		{"deletion seen late", cache.DeletedFinalStateUnknown{Key: "default/x"}, fwk.Queue},
		// Its claims were freed before it was deleted: claim events said so.
		{"pod that ran to completion", completed, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := env.pl.isSchedulableAfterAssignedPodDelete(env.tCtx.Logger(), waiting, tc.gone, nil)
			if err != nil || got != tc.want {
				t.Errorf("hint %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	t.Run("unexpected object", func(t *testing.T) {
		if got, err := env.pl.isSchedulableAfterAssignedPodDelete(env.tCtx.Logger(), waiting, held, nil); err == nil || got != fwk.Queue {
			t.Errorf("hint %v, %v; want Queue and an error", got, err)
		}
	})
}

// EventsToRegister lists the events the hints above are for.
func TestEventsToRegister(t *testing.T) {
	env := newTestEnv(t, objects{})
	events, err := env.pl.EventsToRegister(env.tCtx)
	if err != nil {
		t.Fatal(err)
	}
	var resources []fwk.EventResource
	for _, e := range events {
		resources = append(resources, e.Event.Resource)
		// As upstream: a device plugin that starts or stops advertising
		// an extended resource changes whether DRA serves it there.
		if e.Event.Resource == fwk.Node && e.Event.ActionType&fwk.UpdateNodeAllocatable == 0 {
			t.Errorf("node events %v lack allocatable updates", e.Event.ActionType)
		}
	}
	for _, want := range []fwk.EventResource{fwk.Node, fwk.ResourceClaim, fwk.TargetPod, fwk.AssignedPod, fwk.DeviceClass, fwk.ResourceSlice} {
		if !slices.Contains(resources, want) {
			t.Errorf("events %v lack %v", resources, want)
		}
	}
}

// fourGPUNode is node-a with 4 GPUs in NVLink pairs, the GPU class and
// the claims.
func fourGPUNode(t *testing.T, claims ...*resourceapi.ResourceClaim) *testEnv {
	return newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		claims:  claims,
	})
}

// sharedClaimGroup is fourGPUNode with claim c of 2 (its UID) and a
// pod-group cycle for the pods that share it.
func sharedClaimGroup(t *testing.T) (*testEnv, types.UID, *framework.CycleState) {
	env := fourGPUNode(t, claim("c", 2).Obj())
	return env, env.storedClaim("c").UID, framework.NewCycleState()
}

// reserveInGroup places and reserves the pods on node-a in one pod-group
// cycle (group), and returns their cycles.
func (e *testEnv) reserveInGroup(group *framework.CycleState, pods ...*v1.Pod) []*framework.CycleState {
	e.tCtx.Helper()
	var cycles []*framework.CycleState
	for _, pod := range pods {
		cs := e.inGroupCycle(group, pod, "node-a")
		cycles = append(cycles, cs)
		if status := e.pl.Reserve(e.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
			e.tCtx.Fatalf("Reserve %s: %v", pod.Name, status)
		}
	}
	return cycles
}

// Pods a and b of a group share claim c, both placed: their binding
// cycles run at once, each writing c. Neither changes the allocation
// object that is a's in flight and that b shares (run with -race, as
// make test-race does, the two wrote its timestamp at once).
func TestPodGroupSharedClaimBoundConcurrently(t *testing.T) {
	env, uid, group := sharedClaimGroup(t)
	env.refuseStaleClaimUpdates()
	a, b := podWithClaims("a", "c"), podWithClaims("b", "c")
	cycles := env.reserveInGroup(group, a, b)
	inFlight := env.pl.draManager.ResourceClaims().GetPendingAllocation(uid)
	if inFlight == nil {
		t.Fatal("c not in flight after both pods reserved it")
	}
	before := inFlight.DeepCopy()
	var wg sync.WaitGroup
	statuses := make([]*fwk.Status, 2)
	for i, pod := range []*v1.Pod{a, b} {
		cycles[i].SetPodGroupSchedulingCycle(nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = env.pl.PreBind(env.tCtx, cycles[i], pod, "node-a")
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if !st.IsSuccess() {
			t.Errorf("PreBind %s: %v", []string{"a", "b"}[i], st)
		}
	}
	if !equality.Semantic.DeepEqual(inFlight, before) {
		t.Errorf("the in-flight allocation was changed by binding: %+v, was %+v", inFlight, before)
	}
	if c := env.storedClaim("c"); c.Status.Allocation == nil || len(c.Status.ReservedFor) != 2 {
		t.Errorf("c holds allocation %v reserved for %v, want both pods'", c.Status.Allocation, c.Status.ReservedFor)
	}
}

// Pods a and b of a group share claim c, which a's cycle allocated; b
// also has a claim of its own and binds first. c gets its note from a,
// not b, whose note words b's claims (kubectl gputopo why showed it
// under c).
func TestPodGroupSharedClaimNotedByThePodThatAllocatedIt(t *testing.T) {
	env := fourGPUNode(t, claim("c", 2).Obj(), claim("b-own", 1).Obj())
	env.refuseStaleClaimUpdates()
	a, b := podWithClaims("a", "c"), podWithClaims("b", "c", "b-own")
	cycles := env.reserveInGroup(framework.NewCycleState(), a, b)
	for _, i := range []int{1, 0} {
		cycles[i].SetPodGroupSchedulingCycle(nil)
		pod := []*v1.Pod{a, b}[i]
		if status := env.pl.PreBind(env.tCtx, cycles[i], pod, "node-a"); !status.IsSuccess() {
			t.Fatalf("PreBind %s: %v", pod.Name, status)
		}
	}
	if note := env.storedClaim("c").Annotations[PlacementAnnotation]; !strings.Contains(note, "allocated c=") || strings.Contains(note, "b-own") {
		t.Errorf("c's note %q, want a's, which words c", note)
	}
	if note := env.storedClaim("b-own").Annotations[PlacementAnnotation]; !strings.Contains(note, "b-own") {
		t.Errorf("b-own's note %q does not name it", note)
	}
}

// Pods a and b of a group share claim c, in flight for a. When another
// plugin's Reserve fails for b, the framework unreserves b in every
// plugin, this one too, though its Reserve never ran for b: a's
// allocation must stay in flight, or its devices look free to others.
func TestUnreserveReleasesOnlyWhatThePodReserved(t *testing.T) {
	env, uid, group := sharedClaimGroup(t)
	a, b := podWithClaims("a", "c"), podWithClaims("b", "c")
	cycles := map[*v1.Pod]*framework.CycleState{}
	for _, pod := range []*v1.Pod{a, b} {
		cs := env.inGroupCycle(group, pod, "node-a")
		cycles[pod] = cs
		if pod == a {
			if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
				t.Fatalf("Reserve a: %v", status)
			}
		}
	}
	env.pl.Unreserve(env.tCtx, cycles[b], b, "node-a")
	if env.pl.draManager.ResourceClaims().GetPendingAllocation(uid) == nil {
		t.Fatal("unreserving b, never reserved, dropped a's allocation in flight")
	}
	env.pl.Unreserve(env.tCtx, cycles[a], a, "node-a")
	if env.pl.draManager.ResourceClaims().GetPendingAllocation(uid) != nil {
		t.Error("a's allocation still in flight after a was unreserved")
	}
}

// A pod-group cycle reserves each pod once per placement it tries and
// reverts every trial: the learner counts the pod once, when its group
// is placed and the pod binds, and not at all if the group is refused.
func TestPodGroupTrialsLearnedOnce(t *testing.T) {
	env := fourGPUNode(t, claim("two", 2).Obj(), claim("other", 2).Obj())
	pod := podWithClaims("p", "two")
	learned := env.pl.learner.Observed
	before := learned()
	var cs *framework.CycleState
	for trial := range 3 {
		cs = env.inGroupCycle(framework.NewCycleState(), pod, "node-a")
		if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
			t.Fatalf("trial %d Reserve: %v", trial, status)
		}
		if trial < 2 {
			env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
		}
	}
	if n := learned() - before; n != 0 {
		t.Fatalf("%v requests learned from the group's trials, want none before it binds", n)
	}
	// The framework leaves the group cycle before the binding cycle.
	cs.SetPodGroupSchedulingCycle(nil)
	if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBind: %v", status)
	}
	if n := learned() - before; n != 1 {
		t.Errorf("%v requests learned once the pod bound, want 1", n)
	}

	// As kube-scheduler 1.37 does it: every trial is undone, and the
	// chosen placement reserved again outside the group cycle on the
	// pod's state, then bound.
	pod = podWithClaims("q", "other")
	before = learned()
	cs = env.inGroupCycle(framework.NewCycleState(), pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("trial Reserve: %v", status)
	}
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	cs.SetPodGroupSchedulingCycle(nil)
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBind: %v", status)
	}
	if n := learned() - before; n != 1 {
		t.Errorf("%v requests learned for a pod reserved after its group's trials, want 1", n)
	}
}

// A pod reserved and then unreserved (its PreBind failed, a Permit
// plugin refused it) is retried: the learner counts it once, not once
// per attempt, and the workload it learned reads as before.
func TestRetriedPodLearnedOnce(t *testing.T) {
	env := fourGPUNode(t, claim("two", 2).Obj())
	pod := podWithClaims("p", "two")
	before, workload := env.pl.learner.Observed(), env.pl.learner.Workload()
	attempt := func() *framework.CycleState {
		cs := env.inGroupCycle(nil, pod, "node-a")
		if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
			t.Fatalf("Reserve: %v", status)
		}
		return cs
	}
	for range 3 {
		env.pl.Unreserve(env.tCtx, attempt(), pod, "node-a")
	}
	if n := env.pl.learner.Observed() - before; n != 0 {
		t.Errorf("%v requests learned for a pod reserved and unreserved three times, want none", n)
	}
	if got := env.pl.learner.Workload(); !reflect.DeepEqual(got, workload) {
		t.Errorf("learned workload %v after the undone attempts, want %v as before", got, workload)
	}
	cs := attempt()
	if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBind: %v", status)
	}
	if n := env.pl.learner.Observed() - before; n != 1 {
		t.Errorf("%v requests learned once the pod's claims were written, want 1", n)
	}
	// Bind fails after PreBind wrote the claim: the retry finds it
	// allocated and counts nothing, so this count stays.
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	if n := env.pl.learner.Observed() - before; n != 1 {
		t.Errorf("%v requests learned after the pod was unreserved with its claim written, want 1", n)
	}
}

// A PreBind that wrote one of the pod's claims and failed on the next
// keeps the pod counted, as its first attempt counted it; its retry, which
// allocates the rest or, the claims being allocated, nothing, does not
// count it again.
func TestPartlyWrittenPodLearnedOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
	}{
		{"the retry allocates the rest", []*resourceapi.ResourceClaim{claim("c1", 1).Obj(), claim("c2", 1).Obj(), claim("c3", 1).Obj()}},
		{"the retry allocates nothing", []*resourceapi.ResourceClaim{claim("c1", 1).Obj(), claim("c2", 1).Allocation(allocatedOn("node-a", "gpu-3")).Obj()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := fourGPUNode(t, tc.claims...)
			refuse := true
			env.client.PrependReactor("update", "resourceclaims", func(a cgotesting.Action) (bool, apiruntime.Object, error) {
				if refuse && a.GetSubresource() == "status" && a.(cgotesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim).Name == "c2" {
					return true, nil, apierrors.NewForbidden(resourceapi.Resource("resourceclaims"), "c2", errors.New("denied by policy"))
				}
				return false, nil, nil
			})
			var names []string
			for _, c := range tc.claims {
				names = append(names, c.Name)
			}
			pod := podWithClaims("p", names...)
			before := env.pl.learner.Observed()
			attempt := func() (*framework.CycleState, *fwk.Status) {
				cs := env.inGroupCycle(nil, pod, "node-a")
				if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
					t.Fatalf("Reserve: %v", status)
				}
				return cs, env.pl.PreBind(env.tCtx, cs, pod, "node-a")
			}
			cs, status := attempt()
			wantStatus(t, "PreBind with c2 refused", status, fwk.Error, "denied by policy")
			env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
			refuse = false
			if _, status := attempt(); !status.IsSuccess() {
				t.Fatalf("PreBind of the retry: %v", status)
			}
			if n := env.pl.learner.Observed() - before; n != 1 {
				t.Errorf("%v requests learned for one pod written in two attempts, want 1", n)
			}
		})
	}
}

// An admin-access claim takes no device: the learner and the placement
// metrics do not count it as a job.
func TestAdminAccessIsNotLearned(t *testing.T) {
	mon := claim("mon", 2).Obj()
	mon.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	env := fourGPUNode(t, mon)
	pod := podWithClaims("dcgm", "mon")
	learned, choices := env.pl.learner.Observed(), fragmentationChoices(t)
	env.bindOn(pod, "node-a")
	if n := env.pl.learner.Observed() - learned; n != 0 {
		t.Errorf("%v requests learned from an admin-access claim, want none", n)
	}
	if n := fragmentationChoices(t) - choices; n != 0 {
		t.Errorf("%d placements observed for an admin-access claim, want none", n)
	}
}

// fragmentationChoices counts the placements gputopo_fragmentation_delta_gpus observed.
func fragmentationChoices(t *testing.T) uint64 {
	t.Helper()
	registerMetrics()
	n, err := testutil.GetHistogramMetricCount(fragmentationDelta.ObserverMetric)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
