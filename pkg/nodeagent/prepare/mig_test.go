package prepare_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/prepare"
)

// In mode mig the whole GPU is published too (its counters exclude every
// partition). CUDA sees no device on a GPU in MIG mode without instances,
// so its claim gets the GPU instance spanning the GPU: 7g.80gb at slice 0
// on an H100, made again after a reboot and destroyed at unprepare.
func TestWholeMIGGPUGetsTheInstanceSpanningIt(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	whole := claim("a").device("gpu-2").obj()
	devs, err := n.p.Prepare(ctx, whole)
	if err != nil {
		t.Fatal(err)
	}
	gi := n.instanceAt(t, 2, 0)
	if gi == nil || n.gpuInstances(2) != 1 || gi.Info.Placement.Size != 8 {
		t.Fatalf("GPU 2 has %d instances (at slice 0: %+v), want one spanning its 8 memory slices", n.gpuInstances(2), gi)
	}
	c, _ := claimByUID(n.p.Claims(), "uid-a")
	m := c.Devices[0].MIG
	if m == nil || !m.Created {
		t.Fatalf("checkpoint %+v, want the created instance", c)
	}
	env, nodes := container(t, filepath.Join(n.dir, "cdi"), containerCDI(devs))
	if parent, _ := n.layout.Device("gpu-2"); m.ParentUUID != parent.GPU.UUID || env["NVIDIA_VISIBLE_DEVICES"] != m.ID() {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%s, want the instance %s on GPU 2 (%s)", env["NVIDIA_VISIBLE_DEVICES"], m.ID(), parent.GPU.UUID)
	}
	for _, node := range nodes {
		if node == "/dev/nvidia2" {
			t.Errorf("device nodes %v give the container the parent GPU", nodes)
		}
	}

	// A partition of the same GPU is refused while the whole GPU is held.
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-2-mig-1g10gb-6").obj()); !errors.Is(err, prepare.ErrConflict) {
		t.Errorf("partition of a held MIG GPU: %v, want a conflict", err)
	}

	// The node reboots: the instance is gone and made again.
	destroy(t, gi)
	n.restart(t)
	if _, err := n.p.Prepare(ctx, whole); err != nil {
		t.Fatal(err)
	}
	if n.instanceAt(t, 2, 0) == nil || n.gpuInstances(2) != 1 {
		t.Errorf("after the reboot GPU 2 has %d instances, want the claim's again", n.gpuInstances(2))
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(2) != 0 {
		t.Errorf("unprepare: %v, %d instances left", err, n.gpuInstances(2))
	}
}
