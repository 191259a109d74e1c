package cliqueplacement

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// channelClass selects a node's IMEX channel 0, as NVIDIA's
// ComputeDomain class does.
var channelClass = &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "compute-domain-default-channel.nvidia.com"},
	Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.driver == "compute-domain.nvidia.com" && device.attributes["compute-domain.nvidia.com"].type == "channel" && device.attributes["compute-domain.nvidia.com"].id == 0`}}}}}

type classList []*resourceapi.DeviceClass

func (l classList) List() ([]*resourceapi.DeviceClass, error) { return l, nil }
func (l classList) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("class %s not found", name)
}

type draWithClasses struct {
	draWithClaims
	classes classList
}

func (d draWithClasses) DeviceClasses() fwk.DeviceClassLister         { return d.classes }
func (d draWithClasses) DeviceClassResolver() fwk.DeviceClassResolver { return nil }

// channelSlice publishes the node's channel 0 and IMEX daemon 0, as
// NVIDIA's ComputeDomain plugin does on every node it runs on.
func channelSlice(node string) *resourceapi.ResourceSlice {
	dev := func(name, typ string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": {StringValue: ptr.To(typ)}, "id": {IntValue: ptr.To[int64](0)}}}
	}
	return &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "compute-domain.nvidia.com", NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, Devices: []resourceapi.Device{dev("channel-0", "channel"), dev("daemon-0", "daemon")}}}
}

// A ComputeDomain gang of 6 pods, 2 GPUs and a channel each: rack a's
// trays have 2 GPUs free but their channels taken by running
// ComputeDomain pods; rack e's trays are empty. Counting GPUs only, the
// best fit is rack a, whose trial fails on every tray's channel; with
// maxPlacements 1 the group would wait for ever while e is free.
func TestCliqueEstimateCountsNodeLocalDevices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	claims := map[string]*resourceapi.ResourceClaim{}
	var pods []*v1.Pod
	for i := range 6 {
		g, ch := fmt.Sprintf("gpus-%d", i), fmt.Sprintf("channel-%d", i)
		claims[g] = claimFor(g, contract.ClassGPU, 2)
		claims[ch] = claimFor(ch, channelClass.Name, 1)
		pods = append(pods, podNamed(fmt.Sprintf("w%d", i), g, ch))
	}
	pl := &CliquePlacement{
		args:       &config.GPUCliquePlacementArgs{MaxPlacements: 1},
		draManager: draWithClasses{draWithClaims{claims: claimsByName{claims: claims}}, classList{channelClass}},
		gpuClasses: map[string]bool{contract.ClassGPU: true},
		celCache:   cel.NewCache(8, cel.Features{}),
	}
	grp := &group{pods: pods, pg: &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{
		SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 6}}}}}
	var nodes []fwk.NodeInfo
	gpus := map[string]*topology.NodeGPUs{}
	dra := &draState{taken: func(driver, pool, device string) bool { return pool[0] == 'a' && device == "channel-0" }}
	for rack, free := range map[string]int{"a": 2, "e": 4} {
		for i := range 6 {
			name := fmt.Sprintf("%s-%d", rack, i)
			nodes = append(nodes, nodeInfo(name, nil))
			gpus[name] = &topology.NodeGPUs{GPUs: 4, Free: free, Clique: rack}
			dra.slices = append(dra.slices, channelSlice(name))
		}
	}
	need := pl.groupNeed(grp, 0)
	if need.local[channelClass.Name] != 1 {
		t.Fatalf("need %+v, want one channel per pod", need)
	}
	for _, tc := range []struct {
		name string
		caps map[string]int
		want string
	}{
		{name: "GPUs only", caps: nil, want: "a"},
		{name: "with the nodes' free channels", caps: pl.localCaps(ctx, need.local, dra), want: "e"},
	} {
		domains := groupDomains(klog.Background(), nodes, pods, contract.LabelClique, gpus, tc.caps, false)
		cands, status := candidates(domains, contract.LabelClique, need, "", "", "")
		if status != nil {
			t.Fatalf("%s: %v", tc.name, status)
		}
		if got := pl.bestFit(cands); len(got) != 1 || got[0].name != tc.want {
			t.Errorf("%s: proposed %s, want %s", tc.name, names(got), tc.want)
		}
	}
}

func claimFor(name, class string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}
}

// The cap never hides a clique that could hold the group: a class whose
// devices take several allocations (a shared NIC with a share taken)
// or that no one node has (a slice for all nodes) sets no cap, and a
// gang whose pods do not all ask for the device is capped by the least
// any of its pods asks, whatever their order. Each case's clique (2
// nodes, 4 free GPUs each; every NIC on a node is taken unless shared)
// holds the gang's 2 pods of 2 GPUs.
func TestCliqueEstimateCapHidesNoRoom(t *testing.T) {
	nicClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "nic.example.com"`}}}}}
	nodeNICs := func(shared bool) []*resourceapi.ResourceSlice {
		var out []*resourceapi.ResourceSlice
		for _, n := range []string{"a-0", "a-1"} {
			out = append(out, &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: nicClass.Name, NodeName: ptr.To(n),
				Pool: resourceapi.ResourcePool{Name: n, ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "nic-0", AllowMultipleAllocations: ptr.To(shared)}}}})
		}
		return out
	}
	fabric := []*resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Driver: nicClass.Name, AllNodes: ptr.To(true),
		Pool: resourceapi.ResourcePool{Name: "fabric", ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "nic-0"}, {Name: "nic-1"}}}}}
	for _, tc := range []struct {
		name   string
		asks   []bool // per pod: a NIC claim beside its GPUs
		slices []*resourceapi.ResourceSlice
	}{
		{name: "a shared NIC with a share taken", asks: []bool{true, true}, slices: nodeNICs(true)},
		{name: "NICs for all nodes", asks: []bool{true, true}, slices: fabric},
		{name: "two of four pods ask, listed first", asks: []bool{true, true, false, false}, slices: nodeNICs(false)},
		{name: "two of four pods ask, listed last", asks: []bool{false, false, true, true}, slices: nodeNICs(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			claims := map[string]*resourceapi.ResourceClaim{}
			var pods []*v1.Pod
			for i, nic := range tc.asks {
				names := []string{fmt.Sprintf("gpus-%d", i)}
				claims[names[0]] = claimFor(names[0], contract.ClassGPU, 2)
				if nic {
					names = append(names, fmt.Sprintf("nic-%d", i))
					claims[names[1]] = claimFor(names[1], nicClass.Name, 1)
				}
				pods = append(pods, podNamed(fmt.Sprintf("w%d", i), names...))
			}
			pl := &CliquePlacement{
				args:       &config.GPUCliquePlacementArgs{MaxPlacements: 1},
				draManager: draWithClasses{draWithClaims{claims: claimsByName{claims: claims}}, classList{nicClass}},
				gpuClasses: map[string]bool{contract.ClassGPU: true},
				celCache:   cel.NewCache(8, cel.Features{}),
			}
			grp := &group{pods: pods, pg: &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}}}}
			dra := &draState{slices: tc.slices, taken: func(_, pool, device string) bool { return pool != "fabric" && device == "nic-0" }}
			var nodes []fwk.NodeInfo
			gpus := map[string]*topology.NodeGPUs{}
			for _, n := range []string{"a-0", "a-1"} {
				nodes = append(nodes, nodeInfo(n, nil))
				gpus[n] = &topology.NodeGPUs{GPUs: 4, Free: 4, Clique: "a"}
			}
			need := pl.groupNeed(grp, 0)
			domains := groupDomains(klog.Background(), nodes, pods, contract.LabelClique, gpus, pl.localCaps(ctx, need.local, dra), false)
			if _, status := candidates(domains, contract.LabelClique, need, "", "", ""); status != nil {
				t.Errorf("clique a left out: %v", status)
			}
		})
	}
}
