package prepare_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/prepare"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// node is a mock node with its layout and a preparer over it.
type node struct {
	lib    *mocknvml.Server
	layout *resources.Layout
	dir    string
	p      *prepare.Preparer
}

func newNode(t *testing.T, mode config.Mode) *node {
	t.Helper()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n1", MIG: mode == config.MIG})
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DefaultMode = mode
	layout, err := resources.NewLayout("n1", gpus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{lib: lib, layout: layout, dir: t.TempDir()}
	n.setBoot(t, "boot-1")
	n.restart(t)
	return n
}

// setBoot writes the node's boot ID, as a reboot changes it.
func (n *node) setBoot(t *testing.T, id string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(n.dir, "boot_id"), []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// restart starts a new preparer on the same node and files, as a
// restarted agent would.
func (n *node) restart(t *testing.T) {
	t.Helper()
	p, err := prepare.New(n.lib, n.layout, prepare.Options{CheckpointPath: filepath.Join(n.dir, "checkpoint.json"), CDIDir: filepath.Join(n.dir, "cdi"),
		BootIDPath: filepath.Join(n.dir, "boot_id")})
	if err != nil {
		t.Fatal(err)
	}
	n.p = p
}

func (n *node) gpuInstances(gpu int) int {
	return len(n.lib.Devices[gpu].(*server.Device).GpuInstances)
}

type claimBuilder struct{ c *resourceapi.ResourceClaim }

func claim(name string) *claimBuilder {
	return &claimBuilder{&resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}}
}

func (b *claimBuilder) device(name string) *claimBuilder {
	b.c.Status.Allocation.Devices.Results = append(b.c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
		Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n1", Device: name})
	return b
}

func (b *claimBuilder) share(name, mem string) *claimBuilder {
	id := types.UID("share-" + b.c.Name)
	b.c.Status.Allocation.Devices.Results = append(b.c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
		Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n1", Device: name, ShareID: &id,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem), "compute": resource.MustParse("10")}})
	return b
}

// admin allocates the device with admin access.
func (b *claimBuilder) admin(name string) *claimBuilder {
	b.device(name)
	b.c.Status.Allocation.Devices.Results[len(b.c.Status.Allocation.Devices.Results)-1].AdminAccess = ptr.To(true)
	return b
}

// config adds opaque parameters for driver, for the requests named (all
// when none).
func (b *claimBuilder) config(driver string, requests ...string) *claimBuilder {
	b.c.Status.Allocation.Devices.Config = append(b.c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"kind":"GpuConfig"}`)}}},
	})
	return b
}

func (b *claimBuilder) obj() *resourceapi.ResourceClaim { return b.c }

func TestPrepareWholeGPUWritesCDISpec(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	devs, err := n.p.Prepare(ctx, claim("a").device("gpu-3").device("gpu-4").obj())
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0].DeviceName != "gpu-3" || devs[0].PoolName != "n1" || len(devs[0].CDIDeviceIDs) != 1 {
		t.Fatalf("devices %+v", devs)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(filepath.Join(n.dir, "cdi")), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	d := cache.GetDevice(devs[0].CDIDeviceIDs[0])
	if d == nil {
		t.Fatalf("CDI device %s not found; errors %v", devs[0].CDIDeviceIDs[0], cache.GetErrors())
	}
	uuid := n.layout.Devices[3].GPU.UUID
	spec := d.GetSpec()
	if env := strings.Join(spec.ContainerEdits.Env, " "); !strings.Contains(env, "NVIDIA_VISIBLE_DEVICES="+uuid+",") {
		t.Errorf("spec env %q does not make GPU 3 (%s) visible", env, uuid)
	}
	if nodes := d.ContainerEdits.DeviceNodes; len(nodes) != 1 || nodes[0].Path != "/dev/nvidia3" {
		t.Errorf("device nodes %+v, want /dev/nvidia3", nodes)
	}

	// Prepare twice = same result.
	again, err := n.p.Prepare(ctx, claim("a").device("gpu-3").device("gpu-4").obj())
	if err != nil || len(again) != 2 || again[0].CDIDeviceIDs[0] != devs[0].CDIDeviceIDs[0] {
		t.Errorf("second prepare: %+v, %v", again, err)
	}

	// Unprepare removes the spec; twice is fine.
	for range 2 {
		if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cache.Refresh(); err != nil {
		t.Fatal(err)
	}
	if cache.GetDevice(devs[0].CDIDeviceIDs[0]) != nil {
		t.Error("CDI device still there after unprepare")
	}
}

func TestPrepareRefusesConflicts(t *testing.T) {
	tests := []struct {
		name        string
		mode        config.Mode
		first, then *resourceapi.ResourceClaim
		conflict    bool
	}{
		{"same GPU", config.Whole, claim("a").device("gpu-1").obj(), claim("b").device("gpu-1").obj(), true},
		{"other GPU", config.Whole, claim("a").device("gpu-1").obj(), claim("b").device("gpu-2").obj(), false},
		{"overlapping MIG placements", config.MIG, claim("a").device("gpu-0-mig-3g40gb-0").obj(), claim("b").device("gpu-0-mig-1g10gb-2").obj(), true},
		{"disjoint MIG placements", config.MIG, claim("a").device("gpu-0-mig-3g40gb-0").obj(), claim("b").device("gpu-0-mig-3g40gb-4").obj(), false},
		{"whole GPU over a MIG partition", config.MIG, claim("a").device("gpu-0-mig-1g10gb-6").obj(), claim("b").device("gpu-0").obj(), true},
		{"two shares of a shared GPU", config.Shared, claim("a").share("gpu-0", "8Gi").obj(), claim("b").share("gpu-0", "16Gi").obj(), false},
		{"a share and an exclusive use", config.Shared, claim("a").share("gpu-0", "8Gi").obj(), claim("b").device("gpu-0").obj(), true},
		{"admin access to a GPU in use", config.Whole, claim("a").device("gpu-1").obj(), claim("b").admin("gpu-1").obj(), false},
		{"a GPU under admin access", config.Whole, claim("a").admin("gpu-1").obj(), claim("b").device("gpu-1").obj(), false},
		{"admin access to an overlapping partition", config.MIG, claim("a").device("gpu-0-mig-3g40gb-0").obj(), claim("b").admin("gpu-0-mig-1g10gb-2").obj(), false},
		{"a partition under admin access to the whole GPU", config.MIG, claim("a").admin("gpu-0").obj(), claim("b").device("gpu-0-mig-1g10gb-2").obj(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.mode)
			ctx := context.Background()
			if _, err := n.p.Prepare(ctx, tc.first); err != nil {
				t.Fatal(err)
			}
			_, err := n.p.Prepare(ctx, tc.then)
			if !tc.conflict {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, prepare.ErrConflict) || !strings.Contains(err.Error(), "ns/a (uid-a)") || !strings.Contains(err.Error(), "ns/b (uid-b)") {
				t.Fatalf("error %v: want a conflict naming both claims", err)
			}
			// The refused claim left nothing behind.
			if got := len(n.p.Claims()); got != 1 {
				t.Errorf("%d claims checkpointed, want 1", got)
			}
		})
	}
}

func TestPrepareMIGCreatesAndDestroysInstances(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	devs, err := n.p.Prepare(ctx, claim("a").device("gpu-2-mig-3g40gb-4").device("gpu-2-mig-2g20gb-0").obj())
	if err != nil {
		t.Fatal(err)
	}
	if got := n.gpuInstances(2); got != 2 {
		t.Fatalf("%d GPU instances on GPU 2, want 2", got)
	}
	for gi := range n.lib.Devices[2].(*server.Device).GpuInstances {
		if len(gi.ComputeInstances) != 1 {
			t.Errorf("GPU instance %d has %d compute instances, want 1", gi.Info.Id, len(gi.ComputeInstances))
		}
	}
	claims := n.p.Claims()
	if m := claims[0].Devices[0].MIG; m == nil || !m.Created || !strings.HasPrefix(m.UUID, "MIG-") || strings.HasPrefix(m.UUID, "MIG-GPU-") {
		t.Errorf("checkpointed MIG instance %+v", m)
	}
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-2-mig-3g40gb-4").device("gpu-2-mig-2g20gb-0").obj()); err != nil || n.gpuInstances(2) != 2 {
		t.Errorf("prepare twice: %v, %d instances", err, n.gpuInstances(2))
	}

	// A restarted agent keeps the claim and does not create it again.
	n.restart(t)
	again, err := n.p.Prepare(ctx, claim("a").device("gpu-2-mig-3g40gb-4").device("gpu-2-mig-2g20gb-0").obj())
	if err != nil || again[0].CDIDeviceIDs[0] != devs[0].CDIDeviceIDs[0] || n.gpuInstances(2) != 2 {
		t.Fatalf("after restart: %+v, %v, %d instances", again, err, n.gpuInstances(2))
	}
	// And it still refuses an overlapping partition.
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-2-mig-4g40gb-0").obj()); !errors.Is(err, prepare.ErrConflict) {
		t.Errorf("overlap after restart: %v", err)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if got := n.gpuInstances(2); got != 0 {
		t.Errorf("%d GPU instances after unprepare, want 0", got)
	}
	if len(n.p.Claims()) != 0 {
		t.Error("claim still checkpointed after unprepare")
	}
}

// A crash after the agent recorded its intent and created the GPU
// instance, before it recorded the instance: the next prepare adopts it.
func TestPrepareResumesAfterCrash(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	// The agent dies inside NVML's create: the instance exists, the
	// checkpoint says it was being created.
	dev := n.lib.Devices[5].(*server.Device)
	create := dev.CreateGpuInstanceWithPlacementFunc
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, p *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		create(info, p)
		panic("agent killed")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("want the injected crash")
			}
		}()
		_, _ = n.p.Prepare(ctx, claim("a").device("gpu-5-mig-1g10gb-3").obj())
	}()
	dev.CreateGpuInstanceWithPlacementFunc = create
	n.restart(t)
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-5-mig-1g10gb-3").obj()); err != nil {
		t.Fatal(err)
	}
	if got := n.gpuInstances(5); got != 1 {
		t.Errorf("%d GPU instances, want the one adopted", got)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(5) != 0 {
		t.Errorf("unprepare: %v, %d instances left", err, n.gpuInstances(5))
	}
}

// An instance someone else made at the placement (NVIDIA's mig-manager,
// an operator's nvidia-smi) is never adopted: its workload would share
// the partition, and the claim's unprepare would destroy it.
func TestPrepareRefusesAnInstanceMadeByOthers(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	dev := n.lib.Devices[5].(*server.Device)
	info, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 3, Size: 1}); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	_, err := n.p.Prepare(ctx, claim("a").device("gpu-5-mig-1g10gb-3").obj())
	if err == nil || !strings.Contains(err.Error(), "is held by GPU instance 0, which the agent did not create") {
		t.Fatalf("prepare on another's instance: %v, want it refused", err)
	}
	// Retried by the kubelet: still refused, the instance left alone.
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-5-mig-1g10gb-3").obj()); err == nil {
		t.Error("retried prepare adopted the instance")
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(5) != 1 {
		t.Errorf("unprepare: %v, %d instances, want the other's one left", err, n.gpuInstances(5))
	}
}

// NVML refuses a create where another's instance overlaps; that one is
// then replaced by another's at the claim's very placement. The failed
// create must not leave the claim believing it made that instance: the
// retry refuses it and the unprepare leaves it.
func TestAFailedCreateClaimsNoInstance(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	dev := n.lib.Devices[6].(*server.Device)
	other := func(profile int, start, size uint32) nvml.GpuInstance {
		t.Helper()
		info, _ := dev.GetGpuInstanceProfileInfo(profile)
		gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: size})
		if ret != nvml.SUCCESS {
			t.Fatal(nvml.ErrorString(ret))
		}
		return gi
	}
	gi := other(nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2)
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-6-mig-1g10gb-3").obj()); err == nil || !strings.Contains(err.Error(), "INSUFFICIENT_RESOURCES") {
		t.Fatalf("prepare over another's instance: %v, want NVML's refusal", err)
	}
	gi.Destroy()
	other(nvml.GPU_INSTANCE_PROFILE_1_SLICE, 3, 1)
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-6-mig-1g10gb-3").obj()); err == nil || !strings.Contains(err.Error(), "which the agent did not create") {
		t.Fatalf("retry on another's instance at the placement: %v, want it refused", err)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(6) != 1 {
		t.Fatalf("unprepare: %v, %d instances, want the other's one left", err, n.gpuInstances(6))
	}
}

// A version 1 checkpoint recorded an instance being created as not
// created; read today, it is the agent's own (it may exist), and is
// adopted rather than refused as another's.
func TestVersion1CheckpointAdoptsItsInstance(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	dev := n.lib.Devices[4].(*server.Device)
	info, _ := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 3, Size: 1}); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	uuid, _ := dev.GetUUID()
	v1 := map[string]prepare.Claim{"uid-a": {UID: "uid-a", Namespace: "ns", Name: "a", Devices: []prepare.Device{{
		Requests: []string{"gpu"}, Pool: n.layout.Pool(), Device: "gpu-4-mig-1g10gb-3",
		MIG: &prepare.MIGInstance{ParentUUID: uuid, ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, Start: 3},
	}}}}
	claims, _ := json.Marshal(v1)
	sum := sha256.Sum256(claims)
	file, _ := json.Marshal(map[string]any{"version": 1, "checksum": hex.EncodeToString(sum[:]), "claims": json.RawMessage(claims)})
	path := filepath.Join(n.dir, "checkpoint.json")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	n.restart(t)
	if others, err := n.p.Unowned(uuid, func() ([]discovery.MIGInstance, error) {
		return []discovery.MIGInstance{{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Placement: discovery.Placement{Start: 3, Size: 1}}}, nil
	}); err != nil || len(others) > 0 {
		t.Errorf("the version 1 record does not own its instance: others' %v, %v", others, err)
	}
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-4-mig-1g10gb-3").obj()); err != nil {
		t.Fatal(err)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(4) != 0 {
		t.Errorf("unprepare: %v, %d instances, want its own destroyed", err, n.gpuInstances(4))
	}
}

func TestSharesGetTheirLimits(t *testing.T) {
	n := newNode(t, config.Shared)
	devs, err := n.p.Prepare(context.Background(), claim("a").share("gpu-0", "16Gi").obj())
	if err != nil {
		t.Fatal(err)
	}
	if devs[0].ShareID == nil || *devs[0].ShareID != "share-a" {
		t.Errorf("share ID %v", devs[0].ShareID)
	}
	cache, _ := cdi.NewCache(cdi.WithSpecDirs(filepath.Join(n.dir, "cdi")), cdi.WithAutoRefresh(false))
	d := cache.GetDevice(devs[0].CDIDeviceIDs[0])
	if d == nil {
		t.Fatal("no CDI device")
	}
	env := strings.Join(d.ContainerEdits.Env, " ")
	if !strings.Contains(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10") || !strings.Contains(env, "=16384M") {
		t.Errorf("share env %q", env)
	}
}

func TestPrepareRejectsBadInput(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	other := claim("a").device("gpu-1").obj()
	other.Status.Allocation.Devices.Results[0].Pool = "n2"
	for _, tc := range []struct {
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "u"}}, "status.allocation is empty"},
		{other, `results[0]: pool "n2" is not this node's pool`},
		{claim("b").device("gpu-9").obj(), `results[0]: device "gpu-9" is not published`},
		{claim("c").device("gpu-1").config("gpu.nvidia.com").obj(), "status.allocation.devices.config[0]: opaque parameters for driver gpu.nvidia.com, from the claim (spec.devices.config), for every request: this node agent takes none; remove them from the claim"},
		{claim("d").device("gpu-1").config("other.example.com").config("gpu.nvidia.com", "gpu").obj(), "status.allocation.devices.config[1]: opaque parameters for driver gpu.nvidia.com, from the claim (spec.devices.config), for request gpu:"},
	} {
		if _, err := n.p.Prepare(ctx, tc.claim); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	// Parameters for another request of the claim (another driver's
	// devices) do not concern this node's.
	if _, err := n.p.Prepare(ctx, claim("e").device("gpu-1").config("gpu.nvidia.com", "nic").obj()); err != nil {
		t.Errorf("parameters for request nic only: %v", err)
	}
}

func TestCheckpointIsCheckedOnLoad(t *testing.T) {
	n := newNode(t, config.Whole)
	if _, err := n.p.Prepare(context.Background(), claim("a").device("gpu-1").obj()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(n.dir, "checkpoint.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ edit, want string }{
		{strings.Replace(string(data), "gpu-1", "gpu-2", 1), "checksum mismatch"},
		{strings.Replace(string(data), `"version": 3`, `"version": 9`, 1), "version 9"},
	} {
		if err := os.WriteFile(path, []byte(tc.edit), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := prepare.New(n.lib, n.layout, prepare.Options{CheckpointPath: path, CDIDir: filepath.Join(n.dir, "cdi")})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load: %v, want %q", err, tc.want)
		}
	}
}

// The node reboots: the checkpoint survives, the CDI specs (on tmpfs) and
// the MIG instances do not. The kubelet prepares its claims again, and
// the agent writes the spec and creates the instance again.
func TestPrepareAgainAfterReboot(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	a := claim("a").device("gpu-0-mig-3g40gb-4").obj()
	first, err := n.p.Prepare(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// The reboot.
	destroy(t, n.instanceAt(t, 0, 4))
	if err := os.RemoveAll(filepath.Join(n.dir, "cdi")); err != nil {
		t.Fatal(err)
	}
	n.restart(t)
	again, err := n.p.Prepare(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].CDIDeviceIDs[0] != first[0].CDIDeviceIDs[0] {
		t.Errorf("devices %+v after the reboot, want %+v", again, first)
	}
	if n.instanceAt(t, 0, 4) == nil || n.gpuInstances(0) != 1 {
		t.Errorf("%d GPU instances on GPU 0 after preparing again, want the claim's at slice 4", n.gpuInstances(0))
	}
	specs, _ := filepath.Glob(filepath.Join(n.dir, "cdi", "*"))
	if len(specs) != 1 {
		t.Errorf("CDI specs after preparing again: %v, want the claim's", specs)
	}
	c, _ := claimByUID(n.p.Claims(), "uid-a")
	if !c.Prepared || c.Devices[0].MIG == nil || !c.Devices[0].MIG.Created {
		t.Errorf("checkpoint after preparing again: %+v", c)
	}
	// Unprepare still finds and destroys the new instance.
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(0) != 0 {
		t.Errorf("unprepare: %v, %d instances left", err, n.gpuInstances(0))
	}
}

// After a reboot nothing the agent made exists, so an instance at a
// claim's placement is someone else's (mig-manager's boot-time layout),
// whether the claim's own was made or only being made when the node went
// down: the prepare refuses it, the agent withholds it, and the claim's
// unprepare leaves it.
func TestRebootForgetsTheAgentsInstances(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(map[bool]string{false: "prepared", true: "crashed while creating"}[crashed], func(t *testing.T) {
			n := newNode(t, config.MIG)
			ctx := context.Background()
			a := claim("a").device("gpu-5-mig-1g10gb-3").obj()
			dev := n.lib.Devices[5].(*server.Device)
			create := dev.CreateGpuInstanceWithPlacementFunc
			if crashed {
				dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, p *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
					create(info, p)
					panic("node down")
				}
			}
			func() {
				defer func() { _ = recover() }()
				if _, err := n.p.Prepare(ctx, a); err != nil {
					t.Fatal(err)
				}
			}()
			dev.CreateGpuInstanceWithPlacementFunc = create
			// The reboot; another tool lays out the same instance.
			destroy(t, n.instanceAt(t, 5, 3))
			info, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
			if ret != nvml.SUCCESS {
				t.Fatal(nvml.ErrorString(ret))
			}
			if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 3, Size: 1}); ret != nvml.SUCCESS {
				t.Fatal(nvml.ErrorString(ret))
			}
			n.setBoot(t, "boot-2")
			n.restart(t)
			uuid, _ := dev.GetUUID()
			unowned, err := n.p.Unowned(uuid, func() ([]discovery.MIGInstance, error) { return discovery.MIGInstances(dev) })
			if err != nil || len(unowned) != 1 {
				t.Errorf("instances not the agent's after the reboot: %v (%v), want the other tool's", unowned, err)
			}
			if _, err := n.p.Prepare(ctx, a); err == nil || !strings.Contains(err.Error(), "which the agent did not create") {
				t.Errorf("prepare after the reboot: %v, want the other's instance refused", err)
			}
			if err := n.p.Unprepare(ctx, "uid-a"); err != nil || n.gpuInstances(5) != 1 {
				t.Errorf("unprepare: %v, %d instances, want the other's one left", err, n.gpuInstances(5))
			}
		})
	}
}

// After a reboot that renamed GPUs (names follow NVML's enumeration
// index), a MIG claim on gpu-1 prepared again gets its instance on the
// GPU now named so, the one the scheduler counts it on, not on the GPU
// its old record names: whether that GPU is now at another index or gone
// from the node, and whether the prepare had finished or a crash cut it
// short after the instance was made.
func TestPrepareAgainAfterRebootRenamedGPU(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupted bool
		reboot      func(lib *mocknvml.Server)
	}{
		{name: "GPUs 1 and 2 swapped", reboot: swapGPUs},
		{name: "GPU 1 gone", reboot: dropGPU1},
		{name: "GPU 1 gone, prepare interrupted", interrupted: true, reboot: dropGPU1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, config.MIG)
			ctx := context.Background()
			a := claim("a").device("gpu-1-mig-3g40gb-4").obj()
			cdiDir := filepath.Join(n.dir, "cdi")
			if tc.interrupted {
				// The spec cannot be written: the instance is made and
				// recorded, the claim not prepared.
				if err := os.WriteFile(cdiDir, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := n.p.Prepare(ctx, a); (err != nil) != tc.interrupted {
				t.Fatalf("first prepare: %v", err)
			}
			if err := os.RemoveAll(cdiDir); err != nil {
				t.Fatal(err)
			}
			destroy(t, n.instanceAt(t, 1, 4))
			tc.reboot(n.lib)
			gpus, err := discovery.Discover(n.lib, discovery.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.DefaultMode = config.MIG
			if n.layout, err = resources.NewLayout("n1", gpus, cfg); err != nil {
				t.Fatal(err)
			}
			n.restart(t)
			if _, err := n.p.Prepare(ctx, a); err != nil {
				t.Fatal(err)
			}
			want := n.lib.Devices[1].(*server.Device).UUID
			if n.instanceAt(t, 1, 4) == nil || n.gpuInstances(2) != 0 {
				t.Errorf("instances after preparing again: %d on index 1 (gpu-1), %d on index 2; want the claim's on gpu-1", n.gpuInstances(1), n.gpuInstances(2))
			}
			c, _ := claimByUID(n.p.Claims(), "uid-a")
			if m := c.Devices[0].MIG; m == nil || m.ParentUUID != want || !m.Created || !c.Prepared {
				t.Errorf("checkpoint %+v names %+v, want the prepared instance on %s", c, m, want)
			}
		})
	}
}

// swapGPUs: GPU 1 no longer enumerates first, so GPU 2 takes index 1.
func swapGPUs(lib *mocknvml.Server) {
	gpu1, gpu2 := lib.Devices[1].(*server.Device), lib.Devices[2].(*server.Device)
	gpu1.UUID, gpu2.UUID = gpu2.UUID, gpu1.UUID
}

// dropGPU1: GPU 1 is gone, every later GPU one index down.
func dropGPU1(lib *mocknvml.Server) {
	lib.Devices = append(lib.Devices[:1], lib.Devices[2:]...)
	for i, d := range lib.Devices {
		d.(*server.Device).Index = i
	}
}

// Shares prepared on one GPU never add up past its memory: the last line
// of defense when the scheduler's ledger was wrong.
func TestSharesBeyondTheGPUAreRefused(t *testing.T) {
	n := newNode(t, config.Shared)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, err := n.p.Prepare(ctx, claim(name).share("gpu-0", "40Gi").obj()); err != nil {
			t.Fatalf("share %s: %v", name, err)
		}
	}
	_, err := n.p.Prepare(ctx, claim("c").share("gpu-0", "8Gi").obj())
	if !errors.Is(err, prepare.ErrConflict) || !strings.Contains(err.Error(), "device gpu-0 of claim ns/c") {
		t.Fatalf("a third share past the GPU's memory: %v, want a conflict naming it", err)
	}
	if _, ok := claimByUID(n.p.Claims(), "uid-c"); ok {
		t.Error("the refused claim is in the checkpoint")
	}
	if _, err := n.p.Prepare(ctx, claim("d").share("gpu-1", "8Gi").obj()); err != nil {
		t.Errorf("a share of another GPU: %v", err)
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.p.Prepare(ctx, claim("c").share("gpu-0", "8Gi").obj()); err != nil {
		t.Errorf("the share once another left: %v", err)
	}
}

// A claim deallocated before the kubelet unprepared it and allocated other
// devices is asked for again (after a kubelet restart, say): the old
// preparation goes, instance and all, and the new devices are prepared;
// the old device is then free for another claim.
func TestPrepareAClaimAllocatedAnew(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	first := claim("a").device("gpu-0-mig-3g40gb-4").device("gpu-1-mig-3g40gb-4").obj()
	first.ResourceVersion = "10"
	before, err := n.p.Prepare(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	// Allocated anew (a new resourceVersion), keeping one device.
	again := claim("a").device("gpu-1-mig-3g40gb-4").device("gpu-1-mig-3g40gb-0").obj()
	again.ResourceVersion = "17"
	devs, err := n.p.Prepare(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[1].DeviceName != "gpu-1-mig-3g40gb-0" {
		t.Errorf("devices %+v, want the new allocation's", devs)
	}
	// A runtime that cached the old spec must not find the old names
	// with other content (another GPU list): every name is new.
	for _, d := range devs {
		for _, old := range before {
			if slices.ContainsFunc(d.CDIDeviceIDs, func(id string) bool { return slices.Contains(old.CDIDeviceIDs, id) }) {
				t.Errorf("CDI device IDs %v of the new preparation reuse %v", d.CDIDeviceIDs, old.CDIDeviceIDs)
			}
		}
	}
	if n.gpuInstances(0) != 0 || n.instanceAt(t, 1, 0) == nil {
		t.Errorf("instances: %d on GPU 0, want the old one gone and the new one on GPU 1", n.gpuInstances(0))
	}
	if _, err := n.p.Prepare(ctx, claim("b").device("gpu-0-mig-3g40gb-4").obj()); err != nil {
		t.Errorf("the old device for another claim: %v", err)
	}
	specs, _ := filepath.Glob(filepath.Join(n.dir, "cdi", "*"))
	if len(specs) != 2 {
		t.Errorf("CDI specs %v, want one per claim", specs)
	}
}

// A claim allocated anew with none of this driver's devices (the kubelet
// still asks the drivers it recorded) prepares nothing: the old
// preparation is undone, and neither a spec nor a checkpoint entry is
// left, where the prepare failed on a spec of no devices before.
func TestPrepareAClaimAllocatedAnewElsewhere(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	first := claim("a").device("gpu-1").obj()
	first.ResourceVersion = "10"
	if _, err := n.p.Prepare(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := claim("a").device("gpu-1").obj()
	again.ResourceVersion = "17"
	again.Status.Allocation.Devices.Results[0].Driver = "other.example.com"
	devs, err := n.p.Prepare(ctx, again)
	if err != nil || len(devs) != 0 {
		t.Fatalf("prepare: %v, %v; want no devices and no error", devs, err)
	}
	if got := n.p.Claims(); len(got) != 0 {
		t.Errorf("checkpoint holds %+v, want nothing", got)
	}
	if specs, _ := filepath.Glob(filepath.Join(n.dir, "cdi", "*")); len(specs) != 0 {
		t.Errorf("CDI specs %v, want none", specs)
	}
	n.restart(t)
	if got := n.p.Claims(); len(got) != 0 {
		t.Errorf("checkpoint after a restart holds %+v, want nothing", got)
	}
}

// A claim prepared on a GPU the restarted agent no longer publishes (it
// failed discovery, or the mode changed): preparing it again is refused
// naming the claim and the device, and its unprepare still succeeds.
func TestPrepareAgainWhenTheDeviceIsGone(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	a := claim("a").device("gpu-7").obj()
	if _, err := n.p.Prepare(ctx, a); err != nil {
		t.Fatal(err)
	}
	n.lib.Devices = n.lib.Devices[:7]
	gpus, err := discovery.Discover(n.lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n.layout, err = resources.NewLayout("n1", gpus, config.Default()); err != nil {
		t.Fatal(err)
	}
	n.restart(t)
	_, err = n.p.Prepare(ctx, a)
	for _, want := range []string{"ns/a (uid-a)", `device "gpu-7"`, "no longer published by this node"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("preparing again: %v, want an error containing %q", err, want)
		}
	}
	if err := n.p.Unprepare(ctx, "uid-a"); err != nil {
		t.Errorf("unprepare: %v", err)
	}
}
