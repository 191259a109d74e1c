package prepare_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
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
	// The container names the MIG device by the UUID NVML gives it
	// (MIG-<uuid>), which CUDA and the container toolkit know it by.
	env, nodes := container(t, filepath.Join(n.dir, "cdi"), containerCDI(devs))
	want := n.migUUID(t, 2, m.GI, m.CI)
	if parent, _ := n.layout.Device("gpu-2"); m.ParentUUID != parent.GPU.UUID || want == "" || m.UUID != want || env["NVIDIA_VISIBLE_DEVICES"] != want {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%s (recorded %s), want the MIG device %q of the instance on GPU 2 (%s)", env["NVIDIA_VISIBLE_DEVICES"], m.UUID, want, parent.GPU.UUID)
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

	// The node reboots: the instance is gone and made again, with a MIG
	// device of another UUID, which the container then gets.
	destroy(t, gi)
	n.restart(t)
	if devs, err = n.p.Prepare(ctx, whole); err != nil {
		t.Fatal(err)
	}
	if n.instanceAt(t, 2, 0) == nil || n.gpuInstances(2) != 1 {
		t.Errorf("after the reboot GPU 2 has %d instances, want the claim's again", n.gpuInstances(2))
	}
	c, _ = claimByUID(n.p.Claims(), "uid-a")
	again := n.migUUID(t, 2, c.Devices[0].MIG.GI, c.Devices[0].MIG.CI)
	env, _ = container(t, filepath.Join(n.dir, "cdi"), containerCDI(devs))
	if again == "" || again == want || env["NVIDIA_VISIBLE_DEVICES"] != again {
		t.Errorf("after the reboot NVIDIA_VISIBLE_DEVICES=%s, want the new MIG device %q (before: %s)", env["NVIDIA_VISIBLE_DEVICES"], again, want)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(2) != 0 {
		t.Errorf("unprepare: %v, %d instances left", err, n.gpuInstances(2))
	}
}

// A checkpoint written before the agent kept MIG device UUIDs: preparing
// the claim again (the kubelet restarted) looks the UUID up in NVML
// rather than naming the device in a form CUDA no longer reads.
func TestMIGUUIDOfAnOlderCheckpoint(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	a := claim("a").device("gpu-3-mig-1g10gb-2").obj()
	if _, err := n.p.Prepare(ctx, a); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(n.dir, "checkpoint.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Version int                      `json:"version"`
		Claims  map[string]prepare.Claim `json:"claims"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	m := file.Claims["uid-a"].Devices[0].MIG
	want := n.migUUID(t, 3, m.GI, m.CI)
	m.UUID = ""
	claims, _ := json.Marshal(file.Claims)
	sum := sha256.Sum256(claims)
	old, _ := json.Marshal(map[string]any{"version": file.Version, "checksum": hex.EncodeToString(sum[:]), "claims": json.RawMessage(claims)})
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	n.restart(t)
	devs, err := n.p.Prepare(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := container(t, filepath.Join(n.dir, "cdi"), containerCDI(devs))
	if want == "" || env["NVIDIA_VISIBLE_DEVICES"] != want {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%s, want the MIG device %q", env["NVIDIA_VISIBLE_DEVICES"], want)
	}
}
