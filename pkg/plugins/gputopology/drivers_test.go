package gputopology

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gputopo/gputopo/pkg/contract"
)

const nicDriver = "nic.example.com"

func classSelecting(name, expression string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}}},
	}
}

func TestPinnedDriver(t *testing.T) {
	for _, tc := range []struct {
		expression, want string
	}{
		{`device.driver == "nic.example.com"`, nicDriver},
		{`device.driver=='nic.example.com'`, nicDriver},
		{`device.driver == 'nic.example.com' && device.attributes['nic.example.com'].rdma`, nicDriver},
		{"device.driver == 'nic.example.com' &&\n  device.attributes['nic.example.com'].rdma\n", nicDriver},
		// Nothing that could widen it, nor another form, is read.
		{`device.driver == 'nic.example.com' || device.driver == 'gpu.nvidia.com'`, ""},
		{`device.driver == 'nic.example.com' && x ? true : false`, ""},
		{`'nic.example.com' == device.driver`, ""},
		{`device.driver != 'nic.example.com'`, ""},
		{`device.driver.startsWith('nic')`, ""},
		{`true`, ""},
	} {
		if got := PinnedDriver(classSelecting("c", tc.expression)); got != tc.want {
			t.Errorf("PinnedDriver(%s) = %q, want %q", tc.expression, got, tc.want)
		}
	}
}

// With drivers set, the plugin allocates only their devices: a request
// only another driver's devices can serve is refused before any node is
// tried, and another driver's devices are never picked, even by a class
// that would take them. Nothing is refused or hidden with drivers unset.
func TestDriversLeaveOtherDevices(t *testing.T) {
	nicSlice := st.MakeResourceSlice("node-b", nicDriver).Device("nic-0").Obj()
	anyDevice := classSelecting("any.example.com", "true")
	nicClass := classSelecting(nicDriver, `device.driver == "nic.example.com"`)
	nic := st.MakeResourceClaim().Name("nic").Namespace(ns).RequestWithNameCount("nic", nicDriver, 1).Obj()
	anything := st.MakeResourceClaim().Name("anything").Namespace(ns).RequestWithNameCount("any", anyDevice.Name, 1).Obj()
	nicOrGPU := st.MakeResourceClaim().Name("nic-or-gpu").Namespace(ns).Obj()
	nicOrGPU.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "dev", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "nic", DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "gpu", DeviceClassName: contract.ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}}
	for _, tc := range []struct {
		name      string
		drivers   []string
		pod       *v1.Pod
		preFilter string // PreFilter's refusal, "" for none
		// Filter's outcome on node-a (4 GPUs) and node-b (one NIC).
		onA, onB fwk.Code
	}{
		{name: "GPU and NIC claims, GPU driver only", drivers: []string{contract.DefaultDriver}, pod: podWithClaims("p", "c", "nic"),
			preFilter: "resourceclaim default/nic, request nic: its device class selects devices of driver nic.example.com, which this scheduler leaves to others (it allocates those of gpu.nvidia.com)"},
		{name: "GPU and NIC claims, every driver", pod: podWithClaims("p", "c", "nic"), onA: fwk.UnschedulableAndUnresolvable, onB: fwk.UnschedulableAndUnresolvable},
		{name: "NIC claim, every driver", pod: podWithClaims("p", "nic"), onA: fwk.UnschedulableAndUnresolvable, onB: fwk.Success},
		{name: "a class that takes any device, GPU driver only", drivers: []string{contract.DefaultDriver}, pod: podWithClaims("p", "anything"), onA: fwk.Success, onB: fwk.UnschedulableAndUnresolvable},
		{name: "a class that takes any device, every driver", pod: podWithClaims("p", "anything"), onA: fwk.Success, onB: fwk.Success},
		{name: "NIC or else GPU, GPU driver only", drivers: []string{contract.DefaultDriver}, pod: podWithClaims("p", "nic-or-gpu"), onA: fwk.Success, onB: fwk.UnschedulableAndUnresolvable},
		{name: "NIC or else GPU, every driver", pod: podWithClaims("p", "nic-or-gpu"), onA: fwk.Success, onB: fwk.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{
				nodes:   []*v1.Node{node("node-a"), node("node-b")},
				classes: []*resourceapi.DeviceClass{gpuClass, nicClass, anyDevice},
				slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4), nicSlice},
				claims:  []*resourceapi.ResourceClaim{claim("c", 2).Obj(), nic, anything, nicOrGPU},
			})
			env.pl.args.Drivers = tc.drivers
			env.pl.fts.EnableDRAPrioritizedList = true
			_, status := env.pl.PreFilter(env.tCtx, env.state, tc.pod, nil)
			if tc.preFilter != "" {
				wantStatus(t, "PreFilter", status, fwk.UnschedulableAndUnresolvable, tc.preFilter)
				return
			}
			wantStatus(t, "PreFilter", status, fwk.Success, "")
			for name, want := range map[string]fwk.Code{"node-a": tc.onA, "node-b": tc.onB} {
				if got := env.pl.Filter(env.tCtx, env.state, tc.pod, env.nodes[name]); got.Code() != want {
					t.Errorf("Filter on %s: %v %q, want %v", name, got.Code(), got.Message(), want)
				}
			}
		})
	}
}
