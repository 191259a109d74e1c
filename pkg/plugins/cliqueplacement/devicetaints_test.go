package cliqueplacement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// A GPU with a NoSchedule or NoExecute device taint (the node agent's
// health taint) is free only to a group whose GPU requests tolerate
// some device taint; which taints they cover shows in the trial.
func TestUntaintedOnly(t *testing.T) {
	toleration := []resourceapi.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: resourceapi.DeviceTolerationOpExists}}
	request := func(name, class string, tolerations []resourceapi.DeviceToleration) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: 1, Tolerations: tolerations}}},
		}}}
	}
	firstAvailable := request("first-available", contract.ClassGPU, nil)
	firstAvailable.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "mig", DeviceClassName: contract.ClassMIG, Count: 1},
		{Name: "gpu", DeviceClassName: contract.ClassGPU, Count: 1, Tolerations: toleration},
	}}
	claims := map[string]*resourceapi.ResourceClaim{
		"plain":           request("plain", contract.ClassGPU, nil),
		"tolerant":        request("tolerant", contract.ClassGPU, toleration),
		"tolerant-mig":    request("tolerant-mig", contract.ClassMIG, toleration),
		"first-available": firstAvailable,
	}
	counted := map[string]*topology.NodeGPUs{"t0": {GPUs: 4, Free: 3, FreeTainted: 2}, "t1": {GPUs: 4, Free: 4}}
	all := map[string]*topology.NodeGPUs{"t0": {GPUs: 4, Free: 3, FreeTainted: 2}, "t1": {GPUs: 4, Free: 4}}
	untainted := map[string]*topology.NodeGPUs{"t0": {GPUs: 4, Free: 1}, "t1": {GPUs: 4, Free: 4}}
	for _, tc := range []struct {
		name    string
		pods    []*v1.Pod
		gateOff bool
		want    map[string]*topology.NodeGPUs
	}{
		{name: "no toleration", pods: []*v1.Pod{podNamed("p", "plain")}, want: untainted},
		{name: "one pod tolerates", pods: []*v1.Pod{podNamed("p", "plain"), podNamed("q", "tolerant")}, want: all},
		{name: "a toleration on another class's request", pods: []*v1.Pod{podNamed("p", "plain", "tolerant-mig")}, want: untainted},
		{name: "a toleration on a GPU alternative", pods: []*v1.Pod{podNamed("p", "first-available")}, want: all},
		{name: "DRADeviceTaints off: taints are ignored", pods: []*v1.Pod{podNamed("p", "plain")}, gateOff: true, want: all},
		{name: "a claim not read yet may tolerate", pods: []*v1.Pod{podNamed("p", "plain", "unknown")}, want: all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := &CliquePlacement{
				gpuClasses: map[string]bool{contract.ClassGPU: true},
				fts:        plfeature.Features{EnableDRADeviceTaints: !tc.gateOff},
				draManager: draWithClaims{claims: claimsByName{claims: claims}},
			}
			got, left := pl.untaintedOnly(counted, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("free GPUs (-want +got):\n%s", diff)
			}
			if wantLeft := all["t0"].Free - tc.want["t0"].Free; left != wantLeft {
				t.Errorf("%d free GPUs left out, want %d", left, wantLeft)
			}
			if diff := cmp.Diff(all, counted); diff != "" {
				t.Errorf("the counts given changed (-before +after):\n%s", diff)
			}
		})
	}
}

// A group refused for want of free GPUs is told of the tainted ones left
// out, which kubectl gputopo nodes shows free.
func TestRefusalNamesTaintedGPUsLeftOut(t *testing.T) {
	refusal := fwk.NewStatus(fwk.Unschedulable, "the pod group needs at least 8 free GPUs in one nvidia.com/gpu.clique domain; the most free in one is 4")
	if got := withTaintedLeftOut(nil, 3); got != nil {
		t.Errorf("no refusal became %v", got)
	}
	if got := withTaintedLeftOut(refusal, 0); got != refusal {
		t.Errorf("a refusal with nothing left out became %v", got)
	}
	got := withTaintedLeftOut(refusal, 4)
	want := refusal.Message() + " (4 more free GPUs carry a NoSchedule or NoExecute device taint, and no GPU request of the group has tolerations)"
	if got.Code() != fwk.Unschedulable || got.Message() != want {
		t.Errorf("got %v %q, want %v %q", got.Code(), got.Message(), fwk.Unschedulable, want)
	}
}
