package gputopology

import (
	"fmt"
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
)

// mixedSlice publishes one exclusive GPU (gpu-0) and one shared GPU
// (gpu-1, 80Gi of memory for shares) on nodeName.
func mixedSlice(nodeName string) *resourceapi.ResourceSlice {
	s := gpuSlice(nodeName, 2, func(int) string { return "" })
	s.Spec.Devices[1].AllowMultipleAllocations = ptr.To(true)
	s.Spec.Devices[1].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		"memory": {Value: resource.MustParse("80Gi")},
	}
	return s
}

func modelNode(name, model string) *v1.Node {
	return st.MakeNode().Name(name).Label("kubernetes.io/hostname", name).Label("gpu-model", model).
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "64", v1.ResourceMemory: "256Gi"}).Obj()
}

// placedAndGone reserves the pod on node, which counts it in the learned
// workload, and gives its devices back as when it has run and its claim
// is deallocated (Unreserve would take the count back, as for a pod that
// is retried).
func (e *testEnv) placedAndGone(pod *v1.Pod, node string) {
	e.tCtx.Helper()
	cs := e.scheduleUpTo(pod, node)
	if status := e.pl.Reserve(e.tCtx, cs, pod, node); !status.IsSuccess() {
		e.tCtx.Fatalf("Reserve %s: %v", pod.Name, status)
	}
	s, err := getState(cs)
	if err != nil {
		e.tCtx.Fatal(err)
	}
	for _, uid := range s.signalled {
		e.pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(uid, true)
	}
}

// TestLearnedPlacementExcludesNodes: the whole path from a reserved
// pod's node affinity to the fragmentation Filter measures. After pods
// pinned to T4 nodes are reserved, a G2 node's free GPUs count as lost to
// their share of the learned requests, and a T4 node's do not.
func TestLearnedPlacementExcludesNodes(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{modelNode("node-t4", "T4"), modelNode("node-g2", "G2")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{mixedSlice("node-t4"), mixedSlice("node-g2")},
		claims:  []*resourceapi.ResourceClaim{claim("pinned", 1).Obj()},
	})
	const pinned = 3
	for i := range pinned {
		pod := podWithClaims(fmt.Sprintf("pinned-%d", i), "pinned")
		pod.Spec.Affinity = st.MakePod().NodeAffinityIn("gpu-model", []string{"T4"}, st.NodeSelectorTypeMatchExpressions).Obj().Spec.Affinity
		env.placedAndGone(pod, "node-t4")
	}

	free := podWithClaims("cpu-only")
	cs := framework.NewCycleState()
	if _, status := env.pl.PreFilter(env.tCtx, cs, free, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	before := map[string]float64{}
	for _, n := range []string{"node-t4", "node-g2"} {
		if status := env.pl.Filter(env.tCtx, cs, free, env.nodes[n]); !status.IsSuccess() {
			t.Fatalf("Filter %s: %v", n, status)
		}
		q, ok := NodeQuality(cs, n)
		if !ok {
			t.Fatalf("no quality measured on %s", n)
		}
		before[n] = q.FragmentationBefore
	}
	// node-t4 excludes nothing: its figure is the classes' own. On
	// node-g2 the pinned requests' share (against the prior's
	// unconstrained ones, a tenth of learnerPrior) loses its two free
	// GPUs, the exclusive and the shared one: share x 2 + (1 - share) x
	// the classes' figure.
	share := float64(pinned) / (pinned + learnerPrior/10)
	want := share*2 + (1-share)*before["node-t4"]
	if got := before["node-g2"]; math.Abs(got-want) > 1e-9 || before["node-t4"] >= 2 {
		t.Errorf("fragmentation node-g2 %v, node-t4 %v; want node-g2 %v (the T4-pinned share of the requests loses node-g2's free GPUs)", got, before["node-t4"], want)
	}
}

// TestLearnedPlacementContention: once T4-pinned pods are learned, a
// GPU that an unconstrained pod takes on a T4 node costs, within
// packing, the pressure of the T4-pinned requests on the T4 nodes' free
// GPUs; the same GPU taken by a T4-pinned pod costs nothing more (its
// own placement's pressure is the pod itself).
func TestLearnedPlacementContention(t *testing.T) {
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{modelNode("node-t4", "T4"), modelNode("node-g2", "G2")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{mixedSlice("node-t4"), mixedSlice("node-g2")},
		claims:  []*resourceapi.ResourceClaim{claim("pinned", 1).Obj(), claim("loose", 1).Obj(), claim("loose-pinned", 1).Obj()},
	})
	t4Affinity := st.MakePod().NodeAffinityIn("gpu-model", []string{"T4"}, st.NodeSelectorTypeMatchExpressions).Obj().Spec.Affinity
	const pinned = 3
	for i := range pinned {
		pod := podWithClaims(fmt.Sprintf("pinned-%d", i), "pinned")
		pod.Spec.Affinity = t4Affinity
		env.placedAndGone(pod, "node-t4")
	}
	cost := func(pod *v1.Pod) float64 {
		q, ok := NodeQuality(env.scheduleUpTo(pod, "node-t4"), "node-t4")
		if !ok {
			t.Fatalf("%s: no quality measured on node-t4", pod.Name)
		}
		return q.PackingCost
	}
	pinnedPod := podWithClaims("loose-pinned", "loose-pinned")
	pinnedPod.Spec.Affinity = t4Affinity
	// The T4-pinned share of the requests (against the prior's, a tenth
	// of learnerPrior) times all 4 free GPUs over node-t4's 2.
	share := float64(pinned) / (pinned + learnerPrior/10)
	want := share * 4 / 2
	if got := cost(podWithClaims("loose", "loose")) - cost(pinnedPod); math.Abs(got-want) > 1e-9 {
		t.Errorf("packing cost of a GPU on node-t4, unconstrained less T4-pinned pod: %v, want %v", got, want)
	}
}
