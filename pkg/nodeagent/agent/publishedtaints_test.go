package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// An agent restarts and cannot read its health state: the taints its
// node's slices carry stay, instead of the first publish lifting a fatal
// Xid's, on the GPU each names by UUID (the device names follow NVML's
// enumeration order, which may have changed). Another node's taints are
// not taken.
func TestUnreadableHealthStateKeepsPublishedTaints(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	taint := func(value string, effect resourceapi.DeviceTaintEffect) []resourceapi.DeviceTaint {
		return []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/unhealthy", Value: value, Effect: effect, TimeAdded: ptr.To(metav1.Now())}}
	}
	slice := func(node string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com-old"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To(node),
				Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devices},
		}
	}
	of := func(gpu int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		uuid, _ := lib.Devices[gpu].GetUUID()
		return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: &uuid}}
	}
	client := fakeAPI(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}},
		slice("node-1",
			// Published as gpu-3 by an agent that enumerated GPU 5 third.
			resourceapi.Device{Name: "gpu-3", Attributes: of(5), Taints: taint("xid-48", resourceapi.DeviceTaintEffectNoExecute)},
			resourceapi.Device{Name: "gpu-4", Attributes: of(4), Taints: taint("xid-92", resourceapi.DeviceTaintEffectNoSchedule)}),
		slice("node-2", resourceapi.Device{Name: "gpu-6", Attributes: of(6), Taints: taint("xid-48", resourceapi.DeviceTaintEffectNoExecute)}),
	)
	dir := t.TempDir()
	o := testOptions("node-1", config.Default(), lib, client, dir)
	if err := os.MkdirAll(o.PluginDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.PluginDir, "health.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := agent.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()

	// The node's pool once the agent published it: its 8 GPUs.
	var devices map[string]resourceapi.Device
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		devices = map[string]resourceapi.Device{}
		n := 0
		for _, d := range nodeDevices(ctx, t, client, "node-1") {
			devices[d.Name] = d
			n++
		}
		if n == 8 && len(devices) == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-1 publishes %d devices, want 8", n)
		}
	}
	want := map[string]resourceapi.DeviceTaintEffect{"gpu-5": resourceapi.DeviceTaintEffectNoExecute, "gpu-4": resourceapi.DeviceTaintEffectNoSchedule}
	for name, d := range devices {
		var got resourceapi.DeviceTaintEffect
		if len(d.Taints) > 0 {
			got = d.Taints[0].Effect
		}
		if got != want[name] {
			t.Errorf("%s published with taint %q, want %q", name, got, want[name])
		}
	}
}
