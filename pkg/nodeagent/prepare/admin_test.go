package prepare_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// specEnv is the environment the CDI spec gives a container for a CDI
// device ID.
func (n *node) specEnv(t *testing.T, id string) string {
	t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(filepath.Join(n.dir, "cdi")), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	d := cache.GetDevice(id)
	if d == nil {
		t.Fatalf("CDI device %s not found; errors %v", id, cache.GetErrors())
	}
	return strings.Join(append(d.GetSpec().ContainerEdits.Env, d.ContainerEdits.Env...), " ")
}

// An admin-access claim on a MIG partition neither creates nor destroys
// instances: the workload's instance survives the admin claim's
// unprepare, and the admin claim sees the parent GPU.
func TestAdminAccessLeavesMIGInstancesAlone(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	if _, err := n.p.Prepare(ctx, claim("work").device("gpu-0-mig-3g40gb-0").obj()); err != nil {
		t.Fatal(err)
	}
	devs, err := n.p.Prepare(ctx, claim("adm").admin("gpu-0-mig-3g40gb-0").obj())
	if err != nil {
		t.Fatalf("admin access to a partition in use: %v", err)
	}
	if got := n.gpuInstances(0); got != 1 {
		t.Errorf("%d GPU instances on GPU 0 with the admin claim prepared, want the workload's 1", got)
	}
	uuid := n.layout.Devices[0].GPU.UUID
	if env := n.specEnv(t, devs[0].CDIDeviceIDs[0]); !strings.Contains(env, "NVIDIA_VISIBLE_DEVICES="+uuid) {
		t.Errorf("admin spec env %q, want the parent GPU %s visible", env, uuid)
	}
	if err := n.p.Unprepare(ctx, "uid-adm"); err != nil {
		t.Fatal(err)
	}
	if got := n.gpuInstances(0); got != 1 {
		t.Errorf("%d GPU instances after unpreparing the admin claim, want the workload's 1", got)
	}

	// Admin access first, on a placement without an instance: none made;
	// the workload's claim after it creates its own, which survives.
	if _, err := n.p.Prepare(ctx, claim("adm2").admin("gpu-1-mig-3g40gb-4").obj()); err != nil {
		t.Fatal(err)
	}
	if got := n.gpuInstances(1); got != 0 {
		t.Errorf("admin claim created %d GPU instances, want 0", got)
	}
	if _, err := n.p.Prepare(ctx, claim("work2").device("gpu-1-mig-3g40gb-4").obj()); err != nil {
		t.Fatalf("partition under admin access: %v", err)
	}
	if err := n.p.Unprepare(ctx, "uid-adm2"); err != nil {
		t.Fatal(err)
	}
	if got := n.gpuInstances(1); got != 1 {
		t.Errorf("%d GPU instances on GPU 1 after unpreparing the admin claim, want the workload's 1", got)
	}
}
