package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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
	lib, client, cfg := migNode(t)
	foreignInstance(t, lib)
	dir := t.TempDir()
	start := func() *agent.Agent {
		a, err := agent.Start(ctx, testOptions("node-1", cfg, lib, client, dir))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	published := func() []string { return publishedNames(ctx, t, client) }
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
	// The restarted agent's slices, not the first one's, are checked (the
	// fake clientset's DeleteCollection deletes nothing).
	for _, name := range sliceNames(ctx, t, client) {
		if err := client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if left := sliceNames(ctx, t, client); len(left) > 0 {
		t.Fatalf("slices %v left before the restart", left)
	}
	a = start()
	defer a.Stop()
	check("restarted with its own instance on GPU 0")
}

// Instances that others make or destroy while the agent runs are
// followed: the partitions of a new one are withdrawn from the slices,
// those of one destroyed offered again. The agent's own instance, made
// by a prepare in between, is never withdrawn.
func TestInstancesMadeByOthersAreFollowed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, client, cfg := migNode(t)
	a := startPolling(ctx, t, lib, client, cfg)
	defer a.Stop()
	published := func() []string { return publishedNames(ctx, t, client) }
	onGPU1 := []string{"gpu-1", "gpu-1-mig-3g40gb-4", "gpu-1-mig-1g10gb-5", "gpu-1-mig-2g20gb-4", "gpu-1-mig-7g80gb-0"}
	stillOffered := []string{"gpu-1-mig-4g40gb-0", "gpu-1-mig-1g10gb-3", "gpu-2"}
	waitFor(t, "every partition of GPU 1 offered", func() bool { return containsAll(published(), onGPU1...) })

	// The agent's own instance on GPU 0.
	claim, err := client.ResourceV1().ResourceClaims("team").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Preparer().Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	gi := foreignInstance(t, lib)
	waitFor(t, "GPU 1's partitions on the new instance withdrawn", func() bool { return containsNone(published(), onGPU1...) })
	time.Sleep(50 * time.Millisecond) // several polls
	got := published()
	if !containsAll(got, stillOffered...) || !containsAll(got, "gpu-0", "gpu-0-mig-3g40gb-4") {
		t.Errorf("published %v: want %v, and GPU 0 with the agent's own instance, still offered", got, stillOffered)
	}

	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	waitFor(t, "GPU 1's partitions offered again", func() bool { return containsAll(published(), onGPU1...) })
}

func sliceNames(ctx context.Context, t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

// migNode is DGX H100 node-1 in MIG mode, its API holding claim a of
// partition gpu-0-mig-3g40gb-4, and the agent's configuration.
func migNode(t *testing.T) (*mocknvml.Server, *fake.Clientset, config.Config) {
	t.Helper()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1", MIG: true})
	if err != nil {
		t.Fatal(err)
	}
	client := fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, allocated("a", "gpu-0-mig-3g40gb-4"))
	cfg := config.Default()
	cfg.DefaultMode = config.MIG
	return lib, client, cfg
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func containsNone(have []string, unwanted ...string) bool {
	for _, u := range unwanted {
		if slices.Contains(have, u) {
			return false
		}
	}
	return true
}

// A GPU whose instances cannot be listed at start is not offered at all
// (another's instance may hold any of its slices) until a list works;
// then what the instances found leave free is offered.
func TestInstancesNotListedAtStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, client, cfg := migNode(t)
	foreignInstance(t, lib)
	gpu1 := lib.Devices[1].(*server.Device)
	var failing atomic.Bool
	failing.Store(true)
	list := gpu1.GetGpuInstancesFunc
	gpu1.GetGpuInstancesFunc = func(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
		if failing.Load() {
			return nil, nvml.ERROR_UNKNOWN
		}
		return list(info)
	}
	defer startPolling(ctx, t, lib, client, cfg).Stop()
	published := func() []string { return publishedNames(ctx, t, client) }
	waitFor(t, "the slices", func() bool { return slices.Contains(published(), "gpu-2") })
	if got := published(); slices.ContainsFunc(got, func(name string) bool { return strings.HasPrefix(name, "gpu-1") }) {
		t.Errorf("published %v: want nothing of GPU 1, whose instances were not listed", got)
	}
	failing.Store(false)
	waitFor(t, "GPU 1's partitions beside the other's instance offered", func() bool {
		got := published()
		return containsAll(got, "gpu-1-mig-4g40gb-0", "gpu-1-mig-1g10gb-3") && containsNone(got, "gpu-1", "gpu-1-mig-3g40gb-4")
	})
}

// foreignInstance makes another tool's 3g.40gb on GPU 1, slices 4-7.
func foreignInstance(t *testing.T, lib *mocknvml.Server) nvml.GpuInstance {
	t.Helper()
	gpu1 := lib.Devices[1].(*server.Device)
	info, _ := gpu1.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	gi, ret := gpu1.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 4, Size: 4})
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	return gi
}

// startPolling starts node-1's agent listing MIG instances every 10 ms.
func startPolling(ctx context.Context, t *testing.T, lib *mocknvml.Server, client *fake.Clientset, cfg config.Config) *agent.Agent {
	t.Helper()
	o := testOptions("node-1", cfg, lib, client, t.TempDir())
	o.MIGPollInterval = 10 * time.Millisecond
	a, err := agent.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
