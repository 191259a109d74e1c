package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// fakeAPI is a fake API holding objs. Its ResourceSlice creates get the
// names the API server would generate from generateName, which the fake
// clientset does not.
func fakeAPI(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	generated := 0
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		s := action.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" {
			generated++
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, generated)
		}
		return false, nil, nil
	})
	return client
}

// testOptions are the options of an agent on node, its plugin, registry
// and CDI directories under dir.
func testOptions(node string, cfg config.Config, lib nvml.Interface, client kubernetes.Interface, dir string) agent.Options {
	return agent.Options{
		NodeName: node, Config: cfg, NVML: lib, KubeClient: client,
		PluginDir: filepath.Join(dir, "plugins", cfg.DriverName), RegistrarDir: filepath.Join(dir, "registry"), CDIDir: filepath.Join(dir, "cdi"),
	}
}

// publishedDevices are the devices of every published ResourceSlice.
func publishedDevices(ctx context.Context, t *testing.T, client kubernetes.Interface) []resourceapi.Device {
	t.Helper()
	return nodeDevices(ctx, t, client, "")
}

// nodeDevices are the devices of the node's published slices, of every
// slice for "".
func nodeDevices(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) []resourceapi.Device {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []resourceapi.Device
	for _, s := range list.Items {
		if node == "" || s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			out = append(out, s.Spec.Devices...)
		}
	}
	return out
}

// publishedNames are the names of the published devices.
func publishedNames(ctx context.Context, t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	var names []string
	for _, d := range publishedDevices(ctx, t, client) {
		names = append(names, d.Name)
	}
	return names
}
