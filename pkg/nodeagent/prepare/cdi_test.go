package prepare_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// result adds device to the claim's allocation for request.
func (b *claimBuilder) result(request, device string) *claimBuilder {
	b.c.Status.Allocation.Devices.Results = append(b.c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
		Request: request, Driver: "gpu.nvidia.com", Pool: "n1", Device: device})
	return b
}

// shareOf adds a share of device, with its own share ID, for request.
func (b *claimBuilder) shareOf(request, device, shareID, mem string) *claimBuilder {
	id := types.UID(shareID)
	b.c.Status.Allocation.Devices.Results = append(b.c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
		Request: request, Driver: "gpu.nvidia.com", Pool: "n1", Device: device, ShareID: &id,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)}})
	return b
}

// extendedResource marks the claim as kube-scheduler marks the claim it
// creates for a pod's extended resources.
func (b *claimBuilder) extendedResource() *claimBuilder {
	b.c.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	return b
}

// containerCDI is what the kubelet hands the runtime for a container that
// names these requests of the claim, or the whole claim when none: the
// CDI IDs of the devices of those requests, in order (its DRA manager's
// cdiDevicesAsList).
func containerCDI(devs []kubeletplugin.Device, requests ...string) []string {
	if len(requests) == 0 {
		requests = []string{""}
	}
	var ids []string
	for _, r := range requests {
		for _, d := range devs {
			if r == "" || slices.Contains(d.Requests, r) {
				ids = append(ids, d.CDIDeviceIDs...)
			}
		}
	}
	return ids
}

// container is what a container gets from these CDI devices, merged as
// a runtime merges them (cdi.Cache.InjectDevices: a spec's edits once,
// then each device's; a variable keeps the last value set): its
// environment and device nodes. Nodes are listed, not created, so the
// host needs no GPU.
func container(t *testing.T, dir string, ids []string) (map[string]string, []string) {
	t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	var env, nodes []string
	seen := map[*cdi.Spec]bool{}
	for _, id := range ids {
		d := cache.GetDevice(id)
		if d == nil {
			t.Fatalf("CDI device %s not found; errors %v", id, cache.GetErrors())
		}
		edits := []cdispec.ContainerEdits{d.ContainerEdits}
		if s := d.GetSpec(); !seen[s] {
			seen[s] = true
			edits = append([]cdispec.ContainerEdits{s.ContainerEdits}, edits...)
		}
		for _, e := range edits {
			env = append(env, e.Env...)
			for _, n := range e.DeviceNodes {
				nodes = append(nodes, n.Path)
			}
		}
	}
	spec := &oci.Spec{Process: &oci.Process{}}
	if err := (&cdi.ContainerEdits{ContainerEdits: &cdispec.ContainerEdits{Env: env}}).Apply(spec); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range spec.Process.Env {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out, nodes
}

func (n *node) uuids(gpus ...int) string {
	var ids []string
	for _, g := range gpus {
		ids = append(ids, n.layout.Devices[g].GPU.UUID)
	}
	return strings.Join(ids, ",")
}

// A pod's nvidia.com/gpu: N gets one claim with a request per container;
// each container sees its own GPUs only, through the toolkit's variable
// as through its device nodes. A container given a whole claim of its
// own sees all of that claim's GPUs.
func TestEachContainerSeesItsOwnGPUs(t *testing.T) {
	n := newNode(t, config.Whole)
	ctx := context.Background()
	cdiDir := filepath.Join(n.dir, "cdi")
	// Container 0 asks for nvidia.com/gpu: 2, container 1 for one GPU
	// each of two resources mapped to the driver's classes.
	ext := claim("ext").extendedResource().
		result("container-0-request-0", "gpu-0").result("container-0-request-0", "gpu-1").
		result("container-1-request-0", "gpu-2").
		result("container-1-request-1", "gpu-3").obj()
	extended, err := n.p.Prepare(ctx, ext)
	if err != nil {
		t.Fatal(err)
	}
	regular, err := n.p.Prepare(ctx, claim("reg").result("a", "gpu-4").result("b", "gpu-5").obj())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		ids       []string
		wantGPUs  string
		wantNodes []string
	}{
		{"extended, container 0", containerCDI(extended, "container-0-request-0"), n.uuids(0, 1), []string{"/dev/nvidia0", "/dev/nvidia1"}},
		{"extended, container 1 with two resources", containerCDI(extended, "container-1-request-0", "container-1-request-1"), n.uuids(2, 3), []string{"/dev/nvidia2", "/dev/nvidia3"}},
		{"regular claim, whole", containerCDI(regular), n.uuids(4, 5), []string{"/dev/nvidia4", "/dev/nvidia5"}},
		{"container 0 and a regular claim", append(containerCDI(regular), containerCDI(extended, "container-0-request-0")...), n.uuids(0, 1), []string{"/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia0", "/dev/nvidia1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, nodes := container(t, cdiDir, tc.ids)
			if got := env["NVIDIA_VISIBLE_DEVICES"]; got != tc.wantGPUs {
				t.Errorf("NVIDIA_VISIBLE_DEVICES=%s, want %s", got, tc.wantGPUs)
			}
			var gpuNodes []string
			for _, p := range nodes {
				if p != "/dev/nvidiactl" && !strings.HasPrefix(p, "/dev/nvidia-uvm") {
					gpuNodes = append(gpuNodes, p)
				}
			}
			if !slices.Equal(gpuNodes, tc.wantNodes) {
				t.Errorf("GPU device nodes %v, want %v", gpuNodes, tc.wantNodes)
			}
		})
	}

	// After the node reboots (the specs are on tmpfs) and the agent
	// restarts, the kubelet prepares again and gets the same CDI devices,
	// written again.
	if err := os.RemoveAll(cdiDir); err != nil {
		t.Fatal(err)
	}
	n.restart(t)
	again, err := n.p.Prepare(ctx, ext)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(again, extended, func(a, b kubeletplugin.Device) bool { return slices.Equal(a.CDIDeviceIDs, b.CDIDeviceIDs) }) {
		t.Errorf("CDI devices after a restart %+v, want %+v", again, extended)
	}
	if env, _ := container(t, cdiDir, containerCDI(again, "container-1-request-0")); env["NVIDIA_VISIBLE_DEVICES"] != n.uuids(2, 3) {
		t.Errorf("after a restart, container 1 sees %s, want %s", env["NVIDIA_VISIBLE_DEVICES"], n.uuids(2, 3))
	}
}

// Upstream allocates a shareable GPU more than once in a claim (two
// requests, or a count of two, each a share of it): each share is a CDI
// device of its own, and the GPU is listed once.
func TestSeveralSharesOfOneGPUInAClaim(t *testing.T) {
	n := newNode(t, config.Shared)
	devs, err := n.p.Prepare(context.Background(), claim("a").
		shareOf("small", "gpu-0", "share-1", "8Gi").shareOf("small", "gpu-0", "share-2", "8Gi").
		shareOf("big", "gpu-0", "share-3", "16Gi").obj())
	if err != nil {
		t.Fatal(err)
	}
	ids := containerCDI(devs)
	if len(ids) != 3 || ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
		t.Fatalf("CDI devices %v, want three different ones", ids)
	}
	env, _ := container(t, filepath.Join(n.dir, "cdi"), ids)
	if got := env["NVIDIA_VISIBLE_DEVICES"]; got != n.uuids(0) {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%s, want %s", got, n.uuids(0))
	}
	if env, _ := container(t, filepath.Join(n.dir, "cdi"), containerCDI(devs, "big")); !strings.HasSuffix(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "=16384M") {
		t.Errorf("the big share's container gets memory limit %q, want 16384M", env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"])
	}
}
