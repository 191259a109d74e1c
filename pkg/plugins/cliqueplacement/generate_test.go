package cliqueplacement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// group is a fwk.PodGroupInfo for the tests.
type group struct {
	pods []*v1.Pod
	pg   *schedulingv1beta1.PodGroup
}

func (g *group) GetUnscheduledPods() []*v1.Pod                               { return g.pods }
func (g *group) GetName() string                                             { return "g" }
func (g *group) GetNamespace() string                                        { return "ns" }
func (g *group) GetType() fwk.EntityKeyType                                  { return fwk.PodGroupKeyType }
func (g *group) GetKey() string                                              { return "ns/g" }
func (g *group) GetPodGroup() *schedulingv1beta1.PodGroup                    { return g.pg }
func (g *group) GetCompositePodGroup() *schedulingv1alpha3.CompositePodGroup { return nil }
func (g *group) GetChildren() []fwk.PodGroupInfo                             { return nil }

func pod(name string, selector map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: v1.PodSpec{NodeSelector: selector}}
}

func nodeInfo(name string, labels map[string]string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	return ni
}

func TestSelectedDomain(t *testing.T) {
	key := contract.LabelClique
	tests := []struct {
		name    string
		pods    []*v1.Pod
		want    string
		wantErr string
	}{
		{"none", []*v1.Pod{pod("a", nil), pod("b", map[string]string{"zone": "z"})}, "", ""},
		{"one", []*v1.Pod{pod("a", nil), pod("b", map[string]string{key: "c.1"})}, "c.1", ""},
		{"agree", []*v1.Pod{pod("a", map[string]string{key: "c.1"}), pod("b", map[string]string{key: "c.1"})}, "c.1", ""},
		{"disagree", []*v1.Pod{pod("a", map[string]string{key: "c.1"}), pod("b", map[string]string{key: "c.2"})}, "", `pods a and b of pod group g select different nvidia.com/gpu.clique values ("c.1", "c.2")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, status := selectedDomain(&group{pods: tc.pods}, key)
			if tc.wantErr != "" {
				if status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), tc.wantErr) {
					t.Fatalf("status %v, want UnschedulableAndUnresolvable with %q", status, tc.wantErr)
				}
				return
			}
			if status != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, status, tc.want)
			}
		})
	}
}

func cordoned(ni fwk.NodeInfo) fwk.NodeInfo {
	ni.Node().Spec.Unschedulable = true
	return ni
}

// A placement that runs more of the group beats any that runs fewer,
// however tightly the latter fills its clique: a gang of 6 pods of 4 GPUs
// with minCount 4 placed 4 in a clique left with nothing free, or all 6 in
// one that keeps 48 free.
func TestMorePodsPlacedWins(t *testing.T) {
	tight := rawScore(2, 0)
	roomy := rawScore(0, linkStepsPerGPU*48+fragmentationSteps*8*72)
	if tight >= roomy {
		t.Errorf("4 of 6 pods in a full clique scores %d, all 6 in a roomy one %d: want the roomy one higher", tight, roomy)
	}
	if rawScore(0, 0) != 0 || rawScore(0, 1) >= 0 {
		t.Errorf("scores %d, %d: want 0 for a perfect placement and less for any penalty", rawScore(0, 0), rawScore(0, 1))
	}
}

// devicePlugin gives the node the GPUs a device plugin advertises.
func devicePlugin(n fwk.NodeInfo) fwk.NodeInfo {
	n.Node().Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	return n
}

func TestGroupDomains(t *testing.T) {
	key := contract.LabelClique
	nodes := []fwk.NodeInfo{
		nodeInfo("t0", map[string]string{"fleet": "a"}),
		nodeInfo("t1", map[string]string{"fleet": "a", key: "label.9"}),           // attribute wins
		devicePlugin(nodeInfo("t2", map[string]string{"fleet": "a", key: "c.2"})), // label only (device plugin)
		nodeInfo("t6", map[string]string{"fleet": "a", key: "c.3"}),               // no slices, no GPUs: a CPU node
		nodeInfo("t3", map[string]string{"fleet": "a"}),                           // trays disagree
		nodeInfo("t4", map[string]string{"fleet": "b"}),                           // pods cannot use it
		cordoned(nodeInfo("t5", map[string]string{"fleet": "a"})),                 // its free GPUs take no pod
	}
	gpus := map[string]*topology.NodeGPUs{
		"t0": {GPUs: 4, Free: 4, Clique: "c.1"},
		"t1": {GPUs: 4, Free: 1, Clique: "c.1"},
		"t3": {GPUs: 4, Free: 4, Conflict: []string{"c.1", "c.2"}},
		"t4": {GPUs: 4, Free: 4, Clique: "c.1"},
		"t5": {GPUs: 4, Free: 4, Clique: "c.1"},
	}
	got := groupDomains(klog.Background(), nodes, []*v1.Pod{pod("p", map[string]string{"fleet": "a"})}, key, gpus, nil, false)
	type summary struct {
		Name        string
		Nodes       []string
		GPUs, Free  int
		UnknownGPUs bool
	}
	var sums []summary
	for _, d := range got {
		s := summary{Name: d.name, GPUs: d.gpus, Free: d.free, UnknownGPUs: d.unknownGPUs}
		for _, n := range d.nodes {
			s.Nodes = append(s.Nodes, n.Node().Name)
		}
		sums = append(sums, s)
	}
	want := []summary{
		{Name: "c.1", Nodes: []string{"t0", "t1", "t5"}, GPUs: 12, Free: 5},
		{Name: "c.2", Nodes: []string{"t2"}, UnknownGPUs: true},
		{Name: "c.3", Nodes: []string{"t6"}},
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("groupDomains (-want +got):\n%s", diff)
	}
}

// A node's free GPUs count for the group only if some of its pods may
// land there: a cordon and NoSchedule/NoExecute taints count unless
// tolerated, as the NodeUnschedulable and TaintToleration filters judge.
func TestGroupDomainsTaints(t *testing.T) {
	tainted := func(ni fwk.NodeInfo, effect v1.TaintEffect) fwk.NodeInfo {
		ni.Node().Spec.Taints = []v1.Taint{{Key: "gpu-health", Value: "degraded", Effect: effect}}
		return ni
	}
	tolerating := func(key string) *v1.Pod {
		p := pod("p", nil)
		p.Spec.Tolerations = []v1.Toleration{{Key: key, Operator: v1.TolerationOpExists}}
		return p
	}
	for _, tc := range []struct {
		name string
		node fwk.NodeInfo
		pods []*v1.Pod
		free int
	}{
		{"plain", nodeInfo("n", nil), []*v1.Pod{pod("p", nil)}, 4},
		{"cordoned", cordoned(nodeInfo("n", nil)), []*v1.Pod{pod("p", nil)}, 0},
		{"cordoned, tolerated", cordoned(nodeInfo("n", nil)), []*v1.Pod{tolerating(v1.TaintNodeUnschedulable)}, 4},
		{"NoSchedule", tainted(nodeInfo("n", nil), v1.TaintEffectNoSchedule), []*v1.Pod{pod("p", nil)}, 0},
		{"NoExecute", tainted(nodeInfo("n", nil), v1.TaintEffectNoExecute), []*v1.Pod{pod("p", nil)}, 0},
		{"PreferNoSchedule", tainted(nodeInfo("n", nil), v1.TaintEffectPreferNoSchedule), []*v1.Pod{pod("p", nil)}, 4},
		{"NoSchedule, tolerated by one pod", tainted(nodeInfo("n", nil), v1.TaintEffectNoSchedule), []*v1.Pod{pod("p", nil), tolerating("gpu-health")}, 4},
		{"cordoned and tainted, only the taint tolerated", tainted(cordoned(nodeInfo("n", nil)), v1.TaintEffectNoSchedule), []*v1.Pod{tolerating("gpu-health")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpus := map[string]*topology.NodeGPUs{"n": {GPUs: 4, Free: 4, Clique: "c.1"}}
			got := groupDomains(klog.Background(), []fwk.NodeInfo{tc.node}, tc.pods, contract.LabelClique, gpus, nil, false)
			if len(got) != 1 || got[0].free != tc.free {
				t.Fatalf("domains %+v, want c.1 with %d free", got, tc.free)
			}
		})
	}
}

// A clique whose free GPUs are scattered one or two per tray holds no
// pod of four GPUs: it is not proposed, and a clique of whole free trays
// is, though maxPlacements keeps only the best fits and the emptiest.
func TestCandidatesNeedRoomOnSingleNodes(t *testing.T) {
	scattered := func(name string) *domain {
		return &domain{name: name, free: 10, nodeFree: []int{2, 2, 1, 1, 2, 2}}
	}
	doms := []*domain{scattered("a"), scattered("b"), scattered("c"), {name: "d", free: 40, nodeFree: []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
		{name: "e", free: 72, nodeFree: []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}}}
	need := demand{gpus: 8, pods: 2, smallest: 4}
	cands, status := candidates(doms, contract.LabelClique, need, "", "", "")
	if status != nil {
		t.Fatal(status)
	}
	pl := &CliquePlacement{args: &config.GPUCliquePlacementArgs{MaxPlacements: 4}}
	var got []string
	for _, d := range pl.bestFit(cands) {
		got = append(got, d.name)
	}
	if diff := cmp.Diff([]string{"d", "e"}, got); diff != "" {
		t.Errorf("proposed (-want +got):\n%s", diff)
	}
	_, status = candidates(doms[:3], contract.LabelClique, need, "", "", "")
	if want := "needs at least 8 free GPUs in one nvidia.com/gpu.clique domain, 2 pods of at least 4 on one node each; the most such pods one holds is 0"; status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), want) {
		t.Errorf("status %v, want Unschedulable with %q", status, want)
	}
}

func TestCandidatesAndBestFit(t *testing.T) {
	doms := []*domain{{name: "a", gpus: 72, free: 72}, {name: "b", gpus: 72, free: 8}, {name: "c", gpus: 72, free: 40}, {name: "d", gpus: 72, free: 16}, {name: "e", unknownGPUs: true}}
	tests := []struct {
		name             string
		need             int
		pinned, selected string
		claimed          string
		max              int32
		want             []string
		wantErr          string
	}{
		{name: "best fit first, emptiest last", need: 12, max: 3, want: []string{"d", "c", "a"}},
		{name: "emptiest kept", need: 0, max: 2, want: []string{"b", "a"}},
		{name: "all fit", need: 0, max: 8, want: []string{"b", "d", "c", "a", "e"}},
		{name: "one placement", need: 12, max: 1, want: []string{"d"}},
		{name: "pinned", need: 12, pinned: "c", max: 4, want: []string{"c"}},
		{name: "pinned without room", need: 48, pinned: "c", max: 4, wantErr: "needs at least 48 free GPUs in nvidia.com/gpu.clique c, where the group's scheduled pods run; the most free in one is 40"},
		{name: "selected", need: 4, selected: "b", max: 4, want: []string{"b"}},
		{name: "selected unknown", need: 4, selected: "x", max: 4, wantErr: "the pod group's pods select nvidia.com/gpu.clique x, and no node they may run on is in it"},
		{name: "claimed", need: 4, claimed: "a", max: 1, want: []string{"a"}},
		{name: "claimed without room", need: 48, claimed: "c", max: 4, wantErr: "needs at least 48 free GPUs in nvidia.com/gpu.clique c, where its allocated claims' devices are; the most free in one is 40"},
		// Larger than any clique: it never fits, which the message says.
		{name: "larger than any", need: 80, pinned: "c", max: 4, wantErr: "the most free in one is 40, and the largest holds 72 GPUs in all: lower the gang's minCount or drop the topology constraint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cands, status := candidates(doms, contract.LabelClique, demand{gpus: tc.need}, tc.pinned, tc.selected, tc.claimed)
			if tc.wantErr != "" {
				if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), tc.wantErr) {
					t.Fatalf("status %v, want Unschedulable with %q", status, tc.wantErr)
				}
				return
			}
			pl := &CliquePlacement{args: &config.GPUCliquePlacementArgs{MaxPlacements: tc.max}}
			var got []string
			for _, d := range pl.bestFit(cands) {
				got = append(got, d.name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("proposed (-want +got):\n%s", diff)
			}
		})
	}
}

// Every zone holds a node whose GPUs DRA does not show, so every room
// is unknown: the zone known to have the most free GPUs is still
// proposed, not only the tightest four.
func TestBestFitWithEveryRoomUnknown(t *testing.T) {
	var doms []*domain
	for _, z := range []string{"a", "b", "c", "d", "e"} {
		doms = append(doms, &domain{name: z, gpus: 8, free: 8, unknownGPUs: true})
	}
	doms = append(doms, &domain{name: "f", gpus: 64, free: 64, unknownGPUs: true})
	cands, status := candidates(doms, "topology.kubernetes.io/zone", demand{gpus: 16}, "", "", "")
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	pl := &CliquePlacement{args: &config.GPUCliquePlacementArgs{MaxPlacements: 4}}
	if got := names(pl.bestFit(cands)); !strings.Contains(got, "f(64 free)") {
		t.Errorf("proposed %s, want f among them", got)
	}
}

func TestRequestGPUs(t *testing.T) {
	pl := &CliquePlacement{gpuClasses: map[string]bool{contract.ClassGPU: true}}
	exact := func(class string, mode resourceapi.DeviceAllocationMode, n int64) *resourceapi.ExactDeviceRequest {
		return &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}
	}
	sub := func(class string, n int64) resourceapi.DeviceSubRequest {
		return resourceapi.DeviceSubRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n}
	}
	tests := []struct {
		name string
		req  resourceapi.DeviceRequest
		want int
	}{
		{"exact", resourceapi.DeviceRequest{Exactly: exact(contract.ClassGPU, resourceapi.DeviceAllocationModeExactCount, 4)}, 4},
		{"default mode", resourceapi.DeviceRequest{Exactly: exact(contract.ClassGPU, "", 0)}, 1},
		{"all", resourceapi.DeviceRequest{Exactly: exact(contract.ClassGPU, resourceapi.DeviceAllocationModeAll, 0)}, 0},
		{"other class", resourceapi.DeviceRequest{Exactly: exact(contract.ClassMIG, resourceapi.DeviceAllocationModeExactCount, 2)}, 0},
		{"admin access takes GPUs in use", resourceapi.DeviceRequest{Exactly: func() *resourceapi.ExactDeviceRequest {
			e := exact(contract.ClassGPU, resourceapi.DeviceAllocationModeExactCount, 4)
			e.AdminAccess = ptr.To(true)
			return e
		}()}, 0},
		{"first available: least", resourceapi.DeviceRequest{FirstAvailable: []resourceapi.DeviceSubRequest{sub(contract.ClassGPU, 4), sub(contract.ClassGPU, 2)}}, 2},
		{"first available: other class", resourceapi.DeviceRequest{FirstAvailable: []resourceapi.DeviceSubRequest{sub(contract.ClassGPU, 4), sub(contract.ClassMIG, 1)}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pl.requestGPUs(tc.req); got != tc.want {
				t.Errorf("requestGPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNormalizePlacementScore(t *testing.T) {
	tests := []struct {
		name      string
		raw, want []int64
	}{
		{"spread", []int64{-160, 0, -80}, []int64{1, 100, 50}},
		{"equal", []int64{-16, -16}, []int64{100, 100}},
		{"one", []int64{-3}, []int64{100}},
		// A placement that leaves a pod unplaced loses and does not
		// flatten the others.
		{"one pod unplaced", []int64{-160, rawScore(1, 0), -80, 0}, []int64{1, 0, 50, 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scores := make([]fwk.PlacementScore, len(tc.raw))
			for i, r := range tc.raw {
				scores[i].Score = r
			}
			if status := (&CliquePlacement{}).NormalizePlacementScore(context.Background(), nil, nil, scores); status != nil {
				t.Fatal(status)
			}
			var got []int64
			for _, s := range scores {
				got = append(got, s.Score)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("normalized (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSharedClaims(t *testing.T) {
	got := sharedClaims([]*v1.Pod{podNamed("a", "own-a", "channel"), podNamed("b", "own-b", "channel"), podNamed("c", "own-c")})
	if diff := cmp.Diff(map[string]bool{"channel": true}, got); diff != "" {
		t.Errorf("sharedClaims (-want +got):\n%s", diff)
	}
}

// claimsByName is a claim tracker that knows some claims by name.
type claimsByName struct {
	fwk.ResourceClaimTracker
	claims map[string]*resourceapi.ResourceClaim
}

func (c claimsByName) Get(_, name string) (*resourceapi.ResourceClaim, error) {
	if claim, ok := c.claims[name]; ok {
		return claim, nil
	}
	return nil, fmt.Errorf("claim %s not found", name)
}

type draWithClaims struct {
	fwk.SharedDRAManager
	claims claimsByName
}

func (d draWithClaims) ResourceClaims() fwk.ResourceClaimTracker { return d.claims }

// A group whose claim is allocated already (a PodGroup's claim that
// outlived its evicted pods) is held to the clique of that claim's
// devices; claims in two cliques, or none allocated, hold it to none.
// Leftovers: every claim that holds it is one PodGroupPostFilter frees
// when its pod cannot use it (reserved for nothing or its pod alone, no
// binding under way).
func TestClaimedDomain(t *testing.T) {
	doms := []*domain{
		{name: "c.1", nodes: []fwk.NodeInfo{nodeInfo("t0", nil), nodeInfo("t1", nil)}},
		{name: "c.2", nodes: []fwk.NodeInfo{nodeInfo("t2", nil)}},
	}
	allocatedOn := func(name string, nodes ...string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if len(nodes) > 0 {
			c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: nodes}}}}}}
		}
		return c
	}
	reservedFor := func(c *resourceapi.ResourceClaim, uid types.UID) *resourceapi.ResourceClaim {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: string(uid), UID: uid}}
		return c
	}
	binding := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpus", Driver: "gpu.nvidia.com", Pool: "t2", Device: "gpu-0", BindingConditions: []string{"Attached"}}}
		return c
	}
	podWith := func(claims ...string) *v1.Pod { return podNamed("p", claims...) }
	pl := &CliquePlacement{draManager: draWithClaims{claims: claimsByName{claims: map[string]*resourceapi.ResourceClaim{
		"on-t2":       allocatedOn("on-t2", "t2"),
		"on-t1":       allocatedOn("on-t1", "t1"),
		"anywhere":    allocatedOn("anywhere", "t0", "t2"),
		"unallocated": allocatedOn("unallocated"),
		"own-on-t2":   reservedFor(allocatedOn("own-on-t2", "t2"), "uid-p"),
		"p1-on-t2":    reservedFor(allocatedOn("p1-on-t2", "t2"), "uid-p1"),
		"other-on-t2": reservedFor(allocatedOn("other-on-t2", "t2"), "uid-other"),
		"binding-t2":  binding(allocatedOn("binding-t2", "t2")),
		"failed-on-t2": func() *resourceapi.ResourceClaim {
			c := allocatedOn("failed-on-t2", "t2")
			c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpus", Driver: "gpu.nvidia.com", Pool: "t2", Device: "gpu-0",
				BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"},
			}}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{
				Driver: "gpu.nvidia.com", Pool: "t2", Device: "gpu-0",
				Conditions: []metav1.Condition{{Type: "AttachFailed", Status: metav1.ConditionTrue}},
			}}
			return c
		}(),
	}}}}
	for _, tc := range []struct {
		name      string
		pods      []*v1.Pod
		want      string
		leftovers bool
	}{
		{"allocated in c.2", []*v1.Pod{podWith("on-t2"), podWith()}, "c.2", true},
		{"one in c.2, one reachable from both", []*v1.Pod{podWith("on-t2", "anywhere")}, "c.2", true},
		{"two cliques", []*v1.Pod{podWith("on-t2"), podWith("on-t1")}, "", false},
		{"reachable from both", []*v1.Pod{podWith("anywhere")}, "", false},
		{"not allocated", []*v1.Pod{podWith("unallocated", "missing")}, "", false},
		// Its allocation will be freed: it holds the group nowhere.
		{"binding failed in c.2", []*v1.Pod{podWith("failed-on-t2")}, "", false},
		{"reserved for its pod", []*v1.Pod{podWith("own-on-t2")}, "c.2", true},
		{"reserved for another pod", []*v1.Pod{podWith("other-on-t2")}, "c.2", false},
		{"one leftover, one reserved for another", []*v1.Pod{podWith("own-on-t2", "other-on-t2")}, "c.2", false},
		{"binding under way", []*v1.Pod{podWith("binding-t2")}, "c.2", false},
		// Shared by two pods, reserved for one (a leader died between
		// their PreBinds): that pod's turn frees it, in either order.
		{"shared, reserved for the first pod", []*v1.Pod{podNamed("p1", "p1-on-t2"), podNamed("p2", "p1-on-t2")}, "c.2", true},
		{"shared, reserved for the second pod", []*v1.Pod{podNamed("p2", "p1-on-t2"), podNamed("p1", "p1-on-t2")}, "c.2", true},
	} {
		got, leftovers := pl.claimedDomain(tc.pods, doms)
		if got != tc.want || leftovers != tc.leftovers {
			t.Errorf("%s: %q, leftovers %v; want %q, %v", tc.name, got, leftovers, tc.want, tc.leftovers)
		}
	}
}

// podNamed is pod name (UID uid-name) with the named claims.
func podNamed(name string, claims ...string) *v1.Pod {
	p := pod(name, nil)
	p.UID = types.UID("uid-" + name)
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

// The group's scheduled pods pin it to their clique. A pod on a node that
// publishes no GPUs now (its agent restarting) says nothing while another
// pod pins the group; alone, the group waits for it. A node that
// publishes GPUs in no clique is an error.
func TestPinnedDomain(t *testing.T) {
	nodes := map[string]fwk.NodeInfo{
		"a": nodeInfo("a", nil), "b": nodeInfo("b", nil), "away": nodeInfo("away", nil), "none": nodeInfo("none", nil),
	}
	gpus := map[string]*topology.NodeGPUs{"a": {GPUs: 4, Clique: "c.1"}, "b": {GPUs: 4, Clique: "c.2"}, "none": {GPUs: 4}}
	on := func(name, node string) *v1.Pod {
		p := pod(name, nil)
		p.Spec.NodeName = node
		return p
	}
	for _, tc := range []struct {
		name    string
		pods    []*v1.Pod
		want    string
		wantErr string
	}{
		{name: "none scheduled"},
		{name: "one clique", pods: []*v1.Pod{on("p0", "a"), on("p1", "a")}, want: "c.1"},
		{name: "a node publishing no GPUs now is skipped", pods: []*v1.Pod{on("p0", "away"), on("p1", "a")}, want: "c.1"},
		{name: "only nodes publishing no GPUs", pods: []*v1.Pod{on("p0", "away")}, wantErr: "pod p0 of the group runs on node away, which publishes no GPUs now"},
		{name: "GPUs in no clique", pods: []*v1.Pod{on("p0", "none")}, wantErr: "pod p0 of the group runs on node none, which is in no nvidia.com/gpu.clique domain"},
		{name: "two cliques", pods: []*v1.Pod{on("p0", "a"), on("p1", "b")}, wantErr: "already run in different nvidia.com/gpu.clique domains (c.1, c.2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, status := pinnedDomain(klog.Background(), tc.pods, contract.LabelClique, gpus, func(name string) (fwk.NodeInfo, error) { return nodes[name], nil })
			if tc.wantErr != "" {
				if status == nil || !strings.Contains(status.Message(), tc.wantErr) {
					t.Errorf("status %v, want one containing %q", status, tc.wantErr)
				}
				return
			}
			if status != nil || got != tc.want {
				t.Errorf("pinned %q, %v; want %q", got, status, tc.want)
			}
		})
	}
}
