package agent_test

import (
	"context"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// A GPU instance someone else made (mig-manager, nvidia-smi) is not
// offered: the partitions on its slices and the whole GPU are left out of
// the slices. The agent's own instances, found again after a restart,
// are not mistaken for it.
func TestInstancesMadeByOthersAreNotOffered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1", MIG: true})
	if err != nil {
		t.Fatal(err)
	}
	// Another tool's 3g.40gb on GPU 1, slices 4-7.
	gpu1 := lib.Devices[1].(*server.Device)
	info, _ := gpu1.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if _, ret := gpu1.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 4, Size: 4}); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	client := fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, allocated("a", "gpu-0-mig-3g40gb-4"))
	cfg := config.Default()
	cfg.DefaultMode = config.MIG
	dir := t.TempDir()
	start := func() *agent.Agent {
		a, err := agent.Start(ctx, testOptions("node-1", cfg, lib, client, dir))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	published := func() []string {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				names = append(names, d.Name)
			}
		}
		return names
	}
	withheld := []string{"gpu-1", "gpu-1-mig-3g40gb-4", "gpu-1-mig-1g10gb-5", "gpu-1-mig-2g20gb-4", "gpu-1-mig-7g80gb-0"}
	offered := []string{"gpu-0", "gpu-0-mig-3g40gb-4", "gpu-1-mig-4g40gb-0", "gpu-1-mig-1g10gb-3", "gpu-2"}
	check := func(when string) {
		t.Helper()
		waitFor(t, when+": the slices", func() bool { return slices.Contains(published(), "gpu-2") })
		got := published()
		for _, name := range withheld {
			if slices.Contains(got, name) {
				t.Errorf("%s: %s offered, on another's instance", when, name)
			}
		}
		for _, name := range offered {
			if !slices.Contains(got, name) {
				t.Errorf("%s: %s not offered", when, name)
			}
		}
	}

	a := start()
	check("at start")
	claim, err := client.ResourceV1().ResourceClaims("team").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Preparer().Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	// The restarted agent's slices, not the first one's, are checked.
	if err := client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	a = start()
	defer a.Stop()
	check("restarted with its own instance on GPU 0")
}
