package agent_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// While the node's device plugin advertises its GPUs (the agent runs on
// a node the GPU Operator's device plugin serves), every device is
// published with a NoSchedule taint from the first publish on, so that
// no claim gets a GPU the device plugin hands out too; once the device
// plugin is gone the taint is lifted.
func TestDevicePluginGPUsArePublishedTainted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	withDevicePlugin := func(gpus int64) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-1"}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
		if gpus > 0 {
			n.Status.Allocatable[contract.ExtendedResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return n
	}
	client := fakeAPI(withDevicePlugin(8))
	// Every publish is recorded: none may offer a GPU untainted while
	// the device plugin serves it.
	published := recordPublishes(client)
	a, err := agent.Start(ctx, testOptions("node-1", config.Default(), lib, client, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	tainted := func(devs []resourceapi.Device) int {
		n := 0
		for _, d := range devs {
			for _, taint := range d.Taints {
				if taint.Key == "gpu.nvidia.com/device-plugin" && taint.Effect == resourceapi.DeviceTaintEffectNoSchedule && taint.Value == "" {
					n++
				}
			}
		}
		return n
	}
	waitFor(t, "8 GPUs published, all tainted", func() bool {
		devs := publishedDevices(ctx, t, client)
		return len(devs) == 8 && tainted(devs) == 8
	})
	for i, devs := range published.all() {
		if tainted(devs) != len(devs) {
			t.Errorf("publish %d offered %d of %d devices untainted", i, len(devs)-tainted(devs), len(devs))
		}
	}

	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, withDevicePlugin(0), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the taint lifted once the device plugin is gone", func() bool {
		devs := publishedDevices(ctx, t, client)
		return len(devs) == 8 && tainted(devs) == 0
	})
}

// writtenSlices are the devices of every ResourceSlice written, one entry
// per create or update.
type writtenSlices struct {
	mu     sync.Mutex
	writes [][]resourceapi.Device
}

func recordPublishes(client *fake.Clientset) *writtenSlices {
	w := &writtenSlices{}
	record := func(action k8stesting.Action) (bool, runtime.Object, error) {
		s := action.(interface{ GetObject() runtime.Object }).GetObject().(*resourceapi.ResourceSlice)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.writes = append(w.writes, slices.Clone(s.Spec.Devices))
		return false, nil, nil
	}
	client.PrependReactor("create", "resourceslices", record)
	client.PrependReactor("update", "resourceslices", record)
	return w
}

func (w *writtenSlices) all() [][]resourceapi.Device {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}
