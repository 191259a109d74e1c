package gputopology

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cgotesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	resourceclaimmetrics "k8s.io/dynamic-resource-allocation/resourceclaim/metrics"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/plugins/normalize"
)

var extendedGPUClass = &resourceapi.DeviceClass{
	ObjectMeta: metav1.ObjectMeta{Name: "example-gpu"},
	Spec: resourceapi.DeviceClassSpec{
		ExtendedResourceName: ptr.To("example.com/gpu"),
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + contract.DefaultDriver + `"`}}},
	},
}

func extendedGPUPod(name string, n int64) *v1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return st.MakePod().Name(name).Namespace(ns).UID("uid-pod-" + name).
		Containers([]v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{"example.com/gpu": q}, Limits: v1.ResourceList{"example.com/gpu": q}}}}).Obj()
}

// extendedEnv: node-a with two NVLink pairs, the class that serves
// example.com/gpu, and the pod.
func extendedEnv(t *testing.T, pod *v1.Pod) *testEnv {
	return newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		pods:    []*v1.Pod{pod},
	})
}

func (e *testEnv) claimsInNamespace() []resourceapi.ResourceClaim {
	e.tCtx.Helper()
	l, err := e.client.ResourceV1().ResourceClaims(ns).List(e.tCtx, metav1.ListOptions{})
	e.tCtx.ExpectNoError(err, "list claims")
	return l.Items
}

// A pod that asks for example.com/gpu: 2 gets an NVLink pair through a
// claim created in PreBind. When PreBind fails after creating it,
// Unreserve deletes the claim and releases the devices; the next attempt
// makes a new claim and records it in the pod's status; a later
// Unreserve deletes that claim too.
func TestExtendedResourcePreBindAndUnreserve(t *testing.T) {
	pod := extendedGPUPod("p", 2)
	env := extendedEnv(t, pod)
	var failStatus atomic.Bool
	failStatus.Store(true)
	env.client.PrependReactor("patch", "pods", func(a cgotesting.Action) (bool, apiruntime.Object, error) {
		if a.GetSubresource() == "status" && failStatus.Load() {
			return true, nil, errors.New("injected failure")
		}
		return false, nil, nil
	})
	// Through the plugin's reader, which retries while the claim tracker
	// reports a concurrent modification (a claim event during the read).
	inFlight := func() int {
		state, err := GatherAllocatedState(env.tCtx, env.pl.draManager, env.pl.features.ConsumableCapacity)
		env.tCtx.ExpectNoError(err, "allocated devices")
		return state.AllocatedDevices.Len()
	}

	// Each claim created counts in kube-scheduler's metric, as in-tree.
	resourceclaimmetrics.RegisterMetrics()
	created := func() float64 {
		v, err := testutil.GetCounterMetricValue(resourceclaimmetrics.ResourceClaimCreate.WithLabelValues("success", "false", "", "Pod"))
		env.tCtx.ExpectNoError(err, "read resourceclaim_creates_total")
		return v
	}
	createdBefore := created()

	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if n := inFlight(); n != 2 {
		t.Fatalf("Reserve: %d devices in flight, want 2", n)
	}
	if _, status := env.pl.PreBindPreFlight(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBindPreFlight: %v", status)
	}
	wantStatus(t, "PreBind with the pod status patch failing", env.pl.PreBind(env.tCtx, cs, pod, "node-a"), fwk.Error, "injected failure")
	if n := len(env.claimsInNamespace()); n != 1 {
		t.Fatalf("after the failed PreBind: %d claims, want the one it created", n)
	}
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	if claims := env.claimsInNamespace(); len(claims) != 0 {
		t.Errorf("Unreserve left claims %v", claims)
	}
	// The deleted claim leaves the tracker when the informer sees it go.
	if err := wait.PollUntilContextTimeout(env.tCtx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return inFlight() == 0, nil
	}); err != nil {
		t.Errorf("Unreserve: %d devices still allocated or in flight", inFlight())
	}

	failStatus.Store(false)
	cs = env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("PreBind: %v", status)
	}
	claims := env.claimsInNamespace()
	if len(claims) != 1 {
		t.Fatalf("%d claims, want 1", len(claims))
	}
	c := claims[0]
	if !strings.HasPrefix(c.Name, "p-extended-resources-") || c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		t.Errorf("claim %s, annotations %v: want upstream's name and annotation", c.Name, c.Annotations)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 2 {
		t.Fatalf("allocation %+v, want 2 devices", c.Status.Allocation)
	}
	if note := c.Annotations[PlacementAnnotation]; !strings.Contains(note, "link class nvlink") {
		t.Errorf("placement note %q, want an NVLink pair", note)
	}
	stored, err := env.client.CoreV1().Pods(ns).Get(env.tCtx, pod.Name, metav1.GetOptions{})
	env.tCtx.ExpectNoError(err, "get pod")
	want := &v1.PodExtendedResourceClaimStatus{ResourceClaimName: c.Name, RequestMappings: []v1.ContainerExtendedResourceRequest{
		{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	if got := stored.Status.ExtendedResourceClaimStatus; got == nil || got.ResourceClaimName != want.ResourceClaimName || len(got.RequestMappings) != 1 || got.RequestMappings[0] != want.RequestMappings[0] {
		t.Errorf("pod status %+v, want %+v", got, want)
	}

	// Binding fails after PreBind: the claim goes. (Its name stays in
	// the pod's status, as with upstream's plugin: the API server keeps
	// that field when an update clears it.)
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	if claims := env.claimsInNamespace(); len(claims) != 0 {
		t.Errorf("Unreserve left claims %v", claims)
	}
	if n := created() - createdBefore; n != 2 {
		t.Errorf("resourceclaim_creates_total{status=success} grew by %v, want 2 (one claim per PreBind)", n)
	}
}

// countingDRA counts reads of the claim tracker's allocated state.
type countingDRA struct {
	fwk.SharedDRAManager
	claims *countingClaims
}

func (d countingDRA) ResourceClaims() fwk.ResourceClaimTracker { return d.claims }

type countingClaims struct {
	fwk.ResourceClaimTracker
	gathers atomic.Int32
}

func (c *countingClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	c.gathers.Add(1)
	return c.ResourceClaimTracker.GatherAllocatedState()
}

// A pod with a claim and an extended resource allocates both against one
// read of the ledger per cycle, as upstream's PreFilter reads it: the
// read copies the consumed capacity of every shared device in the
// cluster, so a second one for the extended-resource claim doubled the
// cycle's largest cost on a large shared fleet.
func TestOneLedgerReadPerCycle(t *testing.T) {
	pod := extendedGPUPod("p", 1)
	pod.Spec.ResourceClaims = podWithClaims("p", "c").Spec.ResourceClaims
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a"), node("node-b")},
		classes: []*resourceapi.DeviceClass{gpuClass, extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4), pairSlice("node-b", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("c", 1).Obj()},
		pods:    []*v1.Pod{pod},
	})
	counted := &countingClaims{ResourceClaimTracker: env.pl.draManager.ResourceClaims()}
	env.pl.draManager = countingDRA{SharedDRAManager: env.pl.draManager, claims: counted}

	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Filter(env.tCtx, cs, pod, env.nodes["node-b"]); !status.IsSuccess() {
		t.Fatalf("Filter node-b: %v", status)
	}
	if n := counted.gathers.Load(); n != 1 {
		t.Errorf("PreFilter and Filter on two nodes read the allocated state %d times, want 1", n)
	}
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
}

// The pod's extended-resource claim is the one it controls that carries
// upstream's annotation; a claim from a template it owns is not one.
func TestExtendedClaimOf(t *testing.T) {
	pod := extendedGPUPod("p", 1)
	owned := func(name string, uid types.UID, controller bool, annotated bool) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: uid, Controller: ptr.To(controller)}}}}
		if annotated {
			c.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		want   string
	}{
		{"none", nil, ""},
		{"from a template", []*resourceapi.ResourceClaim{owned("template", pod.UID, true, false)}, ""},
		{"another pod's", []*resourceapi.ResourceClaim{owned("other", "uid-other", true, true)}, ""},
		{"not the controller", []*resourceapi.ResourceClaim{owned("ref", pod.UID, false, true)}, ""},
		{"its own among others", []*resourceapi.ResourceClaim{owned("template", pod.UID, true, false), owned("other", "uid-other", true, true), owned("mine", pod.UID, true, true)}, "mine"},
	} {
		got := ExtendedClaimOf(pod, tc.claims)
		if name := ptr.Deref(got, resourceapi.ResourceClaim{}).Name; name != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, name, tc.want)
		}
	}
}

// A running pod whose resize waits for room is scheduled again
// (InPlacePodVerticalScalingSchedulerPreemption). Its extended-resource
// claim is in use: as upstream, the plugin leaves it alone, where it
// would otherwise take it for an earlier attempt's and delete it in
// PostFilter, freeing GPUs under running containers. Without the gate the
// same pod's claim is an earlier attempt's, which no node can take, so
// preemption is not tried for it.
func TestResizeDeferredPodKeepsItsClaim(t *testing.T) {
	pod := extendedGPUPod("p", 2)
	env := extendedEnv(t, pod)
	env.bindOn(pod, "node-a")
	running, err := env.client.CoreV1().Pods(ns).Get(env.tCtx, pod.Name, metav1.GetOptions{})
	env.tCtx.ExpectNoError(err, "get pod")
	running.Spec.NodeName = "node-a"
	running.Status.Conditions = append(running.Status.Conditions, v1.PodCondition{
		Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred})
	if err := wait.PollUntilContextTimeout(env.tCtx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c := env.claimsInNamespace()
		return len(c) == 1 && c[0].Status.Allocation != nil, nil
	}); err != nil {
		t.Fatalf("the pod's claim is not allocated: %v", env.claimsInNamespace())
	}

	env.pl.fts.EnableInPlacePodVerticalScalingSchedulerPreemption = true
	cs := framework.NewCycleState()
	_, status := env.pl.PreFilter(env.tCtx, cs, running, nil)
	wantStatus(t, "PreFilter of a pod waiting for its resize", status, fwk.Skip, "")
	wantStatus(t, "Filter of a pod waiting for its resize", env.pl.Filter(env.tCtx, cs, running, env.nodes["node-a"]), fwk.Success, "")
	_, status = env.pl.PostFilter(env.tCtx, cs, running, nil)
	wantStatus(t, "PostFilter of a pod waiting for its resize", status, fwk.Unschedulable, "")
	if c := env.claimsInNamespace(); len(c) != 1 || c[0].Status.Allocation == nil {
		t.Fatalf("the running pod's claim was freed or deleted: %v", c)
	}

	env.pl.fts.EnableInPlacePodVerticalScalingSchedulerPreemption = false
	cs = framework.NewCycleState()
	if _, status := env.pl.PreFilter(env.tCtx, cs, running, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter without the gate: %v", status)
	}
	wantStatus(t, "Filter of a pod with an earlier attempt's claim", env.pl.Filter(env.tCtx, cs, running, env.nodes["node-a"]), fwk.UnschedulableAndUnresolvable, "left from an earlier attempt")
}

// A pod that asks for example.com/gpu needs no allocation on a node whose
// device plugin serves it. There every rating takes the mean of the DRA
// nodes' scores, not the lowest: during a migration from the device
// plugin the pod goes where the other plugins (affinity, spreading) say,
// while among DRA nodes the ratings still prefer the NVLink pair.
func TestDevicePluginNodeScoresNeutral(t *testing.T) {
	devicePlugin := node("device-plugin")
	devicePlugin.Status.Allocatable = v1.ResourceList{"example.com/gpu": resource.MustParse("4")}
	pod := extendedGPUPod("p", 2)
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("nvlink"), node("pcie"), devicePlugin},
		classes: []*resourceapi.DeviceClass{extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("nvlink", 4), pcieSlice("pcie", 4)},
		pods:    []*v1.Pod{pod},
	})
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	nodes := []string{"nvlink", "pcie", "device-plugin"}
	for _, n := range nodes {
		if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes[n]); !status.IsSuccess() {
			t.Fatalf("Filter %s: %v", n, status)
		}
	}
	for _, scorer := range []*QualityScorer{
		topologyScorer,
		NewQualityScorer("mig", allocator.Quality.MIGScore, normalize.MinMax, false),
		NewQualityScorer("packing", allocator.Quality.PackingScore, normalize.Clamp, true),
	} {
		if status := scorer.PreScore(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
			t.Fatalf("%s PreScore: %v", scorer.Name(), status)
		}
		var scores fwk.NodeScoreList
		for _, n := range nodes {
			score, status := scorer.Score(env.tCtx, env.state, pod, env.nodes[n])
			if !status.IsSuccess() {
				t.Fatalf("%s Score %s: %v", scorer.Name(), n, status)
			}
			scores = append(scores, fwk.NodeScore{Name: n, Score: score})
		}
		if status := scorer.NormalizeScore(env.tCtx, env.state, pod, scores); !status.IsSuccess() {
			t.Fatal(status)
		}
		nvlink, pcie, dp := scores[0].Score, scores[1].Score, scores[2].Score
		if dp != (nvlink+pcie)/2 || dp < fwk.MinScore || dp > fwk.MaxScore {
			t.Errorf("%s: scores %v, want the device-plugin node at the DRA nodes' mean", scorer.Name(), scores)
		}
		if scorer == topologyScorer && nvlink <= pcie {
			t.Errorf("%s: scores %v, want the NVLink pair above PCIe", scorer.Name(), scores)
		}
	}
}

// The placement note of the pod's own claim names its devices; that of
// the extended-resource claim, made after it, names every claim's. A
// claim deallocated after a failed binding keeps its finalizer; its note
// is written again for the new devices, not left naming the old ones.
func TestPlacementNotes(t *testing.T) {
	pod := extendedGPUPod("p", 1)
	pod.Spec.ResourceClaims = podWithClaims("p", "c").Spec.ResourceClaims
	deallocated := claim("c", 1).Obj()
	deallocated.Finalizers = []string{resourceapi.Finalizer}
	deallocated.Annotations = map[string]string{PlacementAnnotation: "allocated c=[gpu-9] on node gone: an earlier attempt"}
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass, extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		claims:  []*resourceapi.ResourceClaim{deallocated},
		pods:    []*v1.Pod{pod},
	})
	env.bindOn(pod, "node-a")
	own := env.storedClaim("c")
	note := own.Annotations[PlacementAnnotation]
	if !strings.HasPrefix(note, "allocated c=[gpu-") || strings.Contains(note, "extended-resources") || !strings.Contains(note, "] on node node-a") {
		t.Errorf("note of the pod's claim %q, want c's devices alone on node-a", note)
	}
	if n := len(own.Finalizers); n != 1 {
		t.Errorf("finalizers %v, want one", own.Finalizers)
	}
	for _, c := range env.claimsInNamespace() {
		if n := c.Annotations[PlacementAnnotation]; strings.HasPrefix(c.Name, "p-extended-resources-") && (!strings.HasPrefix(n, "allocated c=[gpu-") || !strings.Contains(n, " "+c.Name+"=[gpu-")) {
			t.Errorf("note of the extended-resource claim %q, want c's devices and its own", n)
		}
	}
}

// After a binding that failed once PreBind had written everything, the
// pod's status still maps its extended resources to the claim Unreserve
// deleted (the API server keeps the mapping), and ResourceQuota
// admission charges a claim the mapping does not name on top of the pod's
// own requests: the retry makes its claim under the mapped name, and
// under a new one only when that name is still taken.
func TestRetriedExtendedClaimTakesTheMappedName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken bool // another claim holds the mapped name
	}{{name: "the mapped name is free"}, {name: "the mapped name is taken", taken: true}} {
		t.Run(tc.name, func(t *testing.T) {
			pod := extendedGPUPod("p", 2)
			env := extendedEnv(t, pod)
			cs := env.scheduleUpTo(pod, "node-a")
			if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
				t.Fatalf("Reserve: %v", status)
			}
			if status := env.pl.PreBind(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
				t.Fatalf("PreBind: %v", status)
			}
			env.pl.Unreserve(env.tCtx, cs, pod, "node-a") // the binding failed
			mapped, err := env.client.CoreV1().Pods(ns).Get(env.tCtx, "p", metav1.GetOptions{})
			env.tCtx.ExpectNoError(err, "get pod")
			first := mapped.Status.ExtendedResourceClaimStatus.ResourceClaimName
			if err := wait.PollUntilContextTimeout(env.tCtx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				_, err := env.pl.draManager.ResourceClaims().Get(ns, first)
				return err != nil, nil
			}); err != nil {
				t.Fatalf("claim %s still in the scheduler's cache after Unreserve", first)
			}
			if tc.taken {
				other := claim(first, 1).Obj()
				_, err := env.client.ResourceV1().ResourceClaims(ns).Create(env.tCtx, other, metav1.CreateOptions{})
				env.tCtx.ExpectNoError(err, "create a claim of the mapped name")
			}

			cs = env.scheduleUpTo(mapped, "node-a")
			if status := env.pl.Reserve(env.tCtx, cs, mapped, "node-a"); !status.IsSuccess() {
				t.Fatalf("retry's Reserve: %v", status)
			}
			if status := env.pl.PreBind(env.tCtx, cs, mapped, "node-a"); !status.IsSuccess() {
				t.Fatalf("retry's PreBind: %v", status)
			}
			retried, err := env.client.CoreV1().Pods(ns).Get(env.tCtx, "p", metav1.GetOptions{})
			env.tCtx.ExpectNoError(err, "get pod")
			got := retried.Status.ExtendedResourceClaimStatus.ResourceClaimName
			if (got == first) == tc.taken || !strings.HasPrefix(got, "p-extended-resources-") {
				t.Errorf("first attempt's claim %s, retry's %s; want the same name unless it is taken", first, got)
			}
			if c := env.storedClaim(got); c.Status.Allocation == nil || !reservedForUID(c, pod.UID) {
				t.Errorf("retry's claim %s: allocated %t, reserved for %v; want both, for the pod", got, c.Status.Allocation != nil, c.Status.ReservedFor)
			}
		})
	}
}

// A pod's own claim is written before its extended-resource claim is
// made; when making that claim fails (here a quota refuses it), the own
// claim stays allocated for the retry, and its note must not name
// devices of a claim that was never made.
func TestPlacementNoteWhenTheExtendedClaimIsRefused(t *testing.T) {
	pod := extendedGPUPod("p", 2)
	pod.Spec.ResourceClaims = podWithClaims("p", "c").Spec.ResourceClaims
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass, extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("c", 1).Obj()},
		pods:    []*v1.Pod{pod},
	})
	env.client.PrependReactor("create", "resourceclaims", func(cgotesting.Action) (bool, apiruntime.Object, error) {
		return true, nil, errors.New(`resourceclaims "p-extended-resources-" is forbidden: exceeded quota: gpus`)
	})
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	wantStatus(t, "PreBind with the claim's creation refused", env.pl.PreBind(env.tCtx, cs, pod, "node-a"), fwk.Error, "exceeded quota")
	env.pl.Unreserve(env.tCtx, cs, pod, "node-a")
	own := env.storedClaim("c")
	note := own.Annotations[PlacementAnnotation]
	if own.Status.Allocation == nil || !strings.HasPrefix(note, "allocated c=[gpu-") || strings.Contains(note, "extended-resources") {
		t.Errorf("own claim allocated %t with note %q, want it allocated, its note naming its devices alone", own.Status.Allocation != nil, note)
	}
}

// A pod that asks for a DRA extended resource and one no DeviceClass maps
// fits only nodes that advertise the latter, as with the in-tree plugin,
// which checks it itself: a profile may tell NodeResourcesFit to ignore
// the resource. Advertised at 0 still passes here (NodeResourcesFit
// counts the amount).
func TestUnbackedExtendedResourceNeedsTheNode(t *testing.T) {
	pod := extendedGPUPod("p", 1)
	pod.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("1")
	pod.Spec.Containers[0].Resources.Limits["example.com/fpga"] = resource.MustParse("1")
	withFPGA, zeroFPGA := node("with-fpga"), node("zero-fpga")
	withFPGA.Status.Allocatable = v1.ResourceList{"example.com/fpga": resource.MustParse("2")}
	zeroFPGA.Status.Allocatable = v1.ResourceList{"example.com/fpga": resource.MustParse("0")}
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("without-fpga"), withFPGA, zeroFPGA},
		classes: []*resourceapi.DeviceClass{extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("without-fpga", 2), pairSlice("with-fpga", 2), pairSlice("zero-fpga", 2)},
		pods:    []*v1.Pod{pod},
	})
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	wantStatus(t, "Filter without-fpga", env.pl.Filter(env.tCtx, env.state, pod, env.nodes["without-fpga"]),
		fwk.UnschedulableAndUnresolvable, "cannot fit extended resource example.com/fpga")
	for _, n := range []string{"with-fpga", "zero-fpga"} {
		if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes[n]); !status.IsSuccess() {
			t.Errorf("Filter %s: %v", n, status)
		}
	}
}

// A pod whose status still maps its extended resources to the claim of an
// earlier attempt (deleted since; the API server keeps the field) cannot
// go to a node whose device plugin serves them: no claim would be
// written there, and the kubelet would look for the old one. A node where
// DRA serves them writes the new claim's name over it.
func TestStaleExtendedMappingNeedsDRA(t *testing.T) {
	devicePlugin := node("device-plugin")
	devicePlugin.Status.Allocatable = v1.ResourceList{"example.com/gpu": resource.MustParse("4")}
	pod := extendedGPUPod("p", 2)
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "p-extended-resources-gone",
		RequestMappings:   []v1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}},
	}
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("dra"), devicePlugin},
		classes: []*resourceapi.DeviceClass{extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("dra", 4)},
		pods:    []*v1.Pod{pod},
	})
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	wantStatus(t, "Filter device-plugin", env.pl.Filter(env.tCtx, env.state, pod, env.nodes["device-plugin"]),
		fwk.UnschedulableAndUnresolvable, "maps them to resourceclaim default/p-extended-resources-gone of an earlier attempt")
	if status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes["dra"]); !status.IsSuccess() {
		t.Errorf("Filter dra: %v", status)
	}
}

// A node without room for the pod's extended resources says so in the
// pod's terms: the resource and its container, not the claim that does
// not exist yet or the request names the scheduler made up.
func TestExtendedShortageNamesTheContainer(t *testing.T) {
	pod := extendedGPUPod("p", 8)
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("n")},
		classes: []*resourceapi.DeviceClass{extendedGPUClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("n", 4)},
		pods:    []*v1.Pod{pod},
	})
	if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	status := env.pl.Filter(env.tCtx, env.state, pod, env.nodes["n"])
	wantStatus(t, "Filter", status, fwk.UnschedulableAndUnresolvable, "example.com/gpu of container main: needs 8, 4 match, 4 free")
	if msg := status.Message(); strings.Contains(msg, extendedClaimInMemory) || strings.Contains(msg, "request-0") {
		t.Errorf("Filter: %q names the in-memory claim or its request", msg)
	}
}
