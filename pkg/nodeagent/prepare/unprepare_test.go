package prepare_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/prepare"
)

// instanceAt is the GPU instance at a placement start on GPU index.
func (n *node) instanceAt(t *testing.T, gpu, start int) *server.GpuInstance {
	t.Helper()
	dev := n.lib.Devices[gpu].(*server.Device)
	dev.RLock()
	defer dev.RUnlock()
	for gi := range dev.GpuInstances {
		if int(gi.Info.Placement.Start) == start {
			return gi
		}
	}
	return nil
}

// migUUID is the UUID NVML reports for the MIG device of GPU instance gi
// and compute instance ci on GPU index gpu, "" when there is none.
func (n *node) migUUID(t *testing.T, gpu int, gi, ci uint32) string {
	t.Helper()
	dev := n.lib.Devices[gpu]
	count, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU %d: MIG devices: %v", gpu, ret)
	}
	for i := range count {
		mig, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		g, _ := mig.GetGpuInstanceId()
		c, _ := mig.GetComputeInstanceId()
		if uint32(g) == gi && uint32(c) == ci {
			uuid, _ := mig.GetUUID()
			return uuid
		}
	}
	return ""
}

// destroy destroys a GPU instance and its compute instances, as
// nvidia-smi or a GPU reset would behind the agent's back.
func destroy(t *testing.T, gi *server.GpuInstance) {
	t.Helper()
	gi.RLock()
	var cis []*server.ComputeInstance
	for ci := range gi.ComputeInstances {
		cis = append(cis, ci)
	}
	gi.RUnlock()
	for _, ci := range cis {
		if ret := ci.Destroy(); ret != nvml.SUCCESS {
			t.Fatal(nvml.ErrorString(ret))
		}
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
}

func claimByUID(cs []prepare.Claim, uid string) (prepare.Claim, bool) {
	for _, c := range cs {
		if c.UID == uid {
			return c, true
		}
	}
	return prepare.Claim{}, false
}

// NVML reuses GPU instance IDs: the instance recorded for claim a, gone
// while the agent was down, has its ID reused by claim b's instance.
// Unpreparing a must leave b's instance alone.
func TestUnprepareLeavesAReusedInstanceIDAlone(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-0-mig-3g40gb-0").obj()); err != nil {
		t.Fatal(err)
	}
	n.restart(t) // the agent is down meanwhile
	destroy(t, n.instanceAt(t, 0, 0))
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-0-mig-3g40gb-4").obj()); err != nil {
		t.Fatal(err)
	}
	a, _ := claimByUID(n.p.Claims(), "uid-a")
	b, _ := claimByUID(n.p.Claims(), "uid-b")
	if a.Devices[0].MIG.GI != b.Devices[0].MIG.GI {
		t.Fatalf("b's GPU instance has ID %d, want a's reused ID %d", b.Devices[0].MIG.GI, a.Devices[0].MIG.GI)
	}

	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	gi := n.instanceAt(t, 0, 4)
	if gi == nil || n.gpuInstances(0) != 1 {
		t.Fatalf("unpreparing a destroyed b's instance: %d instances left", n.gpuInstances(0))
	}
	if len(gi.ComputeInstances) != 1 {
		t.Errorf("b's GPU instance has %d compute instances, want 1", len(gi.ComputeInstances))
	}
	if err := n.p.Unprepare(ctx, "uid-b"); err != nil || n.gpuInstances(0) != 0 {
		t.Errorf("unprepare b: %v, %d instances left", err, n.gpuInstances(0))
	}
}

// The agent dies between destroying a claim's two GPU instances: the
// checkpoint records the first as destroyed, so the resumed unprepare
// destroys only the second, not the instance that reused the first's ID.
func TestUnprepareResumesBetweenDestroySteps(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-2-mig-3g40gb-4").device("gpu-2-mig-2g20gb-0").obj()); err != nil {
		t.Fatal(err)
	}
	second := n.instanceAt(t, 2, 0)
	destroyGI := second.DestroyFunc
	second.DestroyFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN } // the agent "dies" here
	if err := n.p.Unprepare(ctx, "uid-a"); err == nil {
		t.Fatal("want the injected failure")
	}
	second.DestroyFunc = destroyGI
	n.restart(t)

	a, ok := claimByUID(n.p.Claims(), "uid-a")
	if !ok || a.Prepared || a.Devices[0].MIG != nil || a.Devices[1].MIG == nil {
		t.Fatalf("checkpoint after the crash: %+v, want a unpreparing, first instance destroyed, second recorded", a)
	}
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-2-mig-1g10gb-2").obj()); err != nil {
		t.Fatal(err)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if n.gpuInstances(2) != 1 || n.instanceAt(t, 2, 2) == nil {
		t.Errorf("%d GPU instances on GPU 2, want only b's at slice 2", n.gpuInstances(2))
	}
	if _, ok := claimByUID(n.p.Claims(), "uid-a"); ok {
		t.Error("a still checkpointed after the resumed unprepare")
	}
}

// A GPU that fell off the bus (its reset destroys every MIG instance) or
// that is no longer there: unprepare forgets the claim's instances
// instead of failing, which the kubelet would retry forever while the
// pod stays Terminating.
func TestUnprepareWhenTheGPUIsGone(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	for _, c := range []*claimBuilder{claim("lost").device("gpu-1-mig-3g40gb-0"), claim("removed").device("gpu-2-mig-3g40gb-0")} {
		if _, err := n.p.Prepare(ctx, c.obj()); err != nil {
			t.Fatal(err)
		}
	}
	lost := n.lib.Devices[1].(*server.Device)
	lost.GetGpuInstanceByIdFunc = func(int) (nvml.GpuInstance, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
	removed := n.lib.Devices[2].(*server.Device).UUID
	byUUID := n.lib.DeviceGetHandleByUUIDFunc
	n.lib.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		if uuid == removed {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return byUUID(uuid)
	}
	for _, uid := range []string{"uid-lost", "uid-removed"} {
		if err := n.p.Unprepare(ctx, types.UID(uid)); err != nil {
			t.Errorf("unprepare %s: %v", uid, err)
		}
		if _, ok := claimByUID(n.p.Claims(), uid); ok {
			t.Errorf("%s still checkpointed", uid)
		}
	}
}

// The checkpoint was removed (to recover from a corrupt one) while claim
// a was prepared: the kubelet's unprepare of a still removes its CDI
// spec, named by the claim's UID.
func TestUnprepareRemovesTheSpecOfAClaimNotInTheCheckpoint(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-1").obj()); err != nil {
		t.Fatal(err)
	}
	specs := func() []string {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(n.dir, "cdi", "*"))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	if len(specs()) != 1 {
		t.Fatalf("CDI specs %v after prepare, want one", specs())
	}
	if err := os.Remove(filepath.Join(n.dir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	n.restart(t)
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if left := specs(); len(left) != 0 {
		t.Errorf("CDI specs %v left after unprepare", left)
	}
}

// A checkpoint write that fails leaves the claim recorded: the kubelet's
// retry writes its removal again, rather than reporting success while
// the file still holds the claim, which a restart would bring back with
// its devices held for good.
func TestUnprepareRetriesAFailedLastWrite(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-1").obj()); err != nil {
		t.Fatal(err)
	}
	diskFull := errors.New("no space left on device")
	failing := true
	prepare.FailCheckpointWrites(t.Cleanup, func(data []byte) bool {
		return failing && !bytes.Contains(data, []byte("uid-a"))
	}, diskFull)
	if err := n.p.Unprepare(ctx, "uid-a"); !errors.Is(err, diskFull) {
		t.Fatalf("unprepare with the disk full: %v", err)
	}
	failing = false
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	n.restart(t)
	if claims := n.p.Claims(); len(claims) != 0 {
		t.Fatalf("after a restart the checkpoint holds %+v", claims)
	}
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-1").obj()); err != nil {
		t.Errorf("gpu-1 for another claim: %v", err)
	}
}

// A failed write while preparing leaves nothing in memory that the file
// lacks: the device is not held by a claim no restart would know.
func TestPrepareWithAFailedWriteHoldsNothing(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	diskFull := errors.New("no space left on device")
	failing := true
	prepare.FailCheckpointWrites(t.Cleanup, func([]byte) bool { return failing }, diskFull)
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-1").obj()); !errors.Is(err, diskFull) {
		t.Fatalf("prepare with the disk full: %v", err)
	}
	if claims := n.p.Claims(); len(claims) != 0 {
		t.Fatalf("memory holds %+v that the checkpoint does not", claims)
	}
	failing = false
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-1").obj()); err != nil {
		t.Errorf("gpu-1 for another claim: %v", err)
	}
}

// Both instances of GPU 1 go (a reset) while the agent runs; b is made
// again first and gets GPU instance ID 0, then a's prepare fails to write
// the checkpoint. The retry must make a's own instance again, not hand a
// the instance that now has the ID a once recorded (b's).
func TestAFailedWriteAfterInstancesWentKeepsClaimsApart(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	a, b := claim("a").device("gpu-1-mig-3g40gb-4").obj(), claim("b").device("gpu-1-mig-3g40gb-0").obj()
	if _, err := n.p.Prepare(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := n.p.Prepare(ctx, b); err != nil {
		t.Fatal(err)
	}
	destroy(t, n.instanceAt(t, 1, 4))
	destroy(t, n.instanceAt(t, 1, 0))
	bDevs, err := n.p.Prepare(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	diskFull := errors.New("no space left on device")
	failing := true
	prepare.FailCheckpointWrites(t.Cleanup, func([]byte) bool { return failing }, diskFull)
	if _, err := n.p.Prepare(ctx, a); !errors.Is(err, diskFull) {
		t.Fatalf("prepare a with the disk full: %v", err)
	}
	failing = false
	aDevs, err := n.p.Prepare(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	aEnv, bEnv := n.specEnv(t, aDevs[0].CDIDeviceIDs[0]), n.specEnv(t, bDevs[0].CDIDeviceIDs[0])
	if aEnv == bEnv || n.gpuInstances(1) != 2 {
		t.Errorf("a sees %q, b sees %q, GPU 1 has %d instances: want two instances, one each", aEnv, bEnv, n.gpuInstances(1))
	}
}
