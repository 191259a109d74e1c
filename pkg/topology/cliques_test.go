package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

const testDriver = "gpu.nvidia.com"

// tray is a node's slice: one device per entry of devices (name, then
// attributes as attrs takes them).
func tray(node string, generation int64, devices map[string][]any) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: testDriver, NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1},
	}}
	for name, kv := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name, Attributes: attrs(kv...)})
	}
	return s
}

// ofTwo makes s one of its pool's two slices.
func ofTwo(s *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	s.Spec.Pool.ResourceSliceCount = 2
	return s
}

func gpuAttrs(uuid, clique string) []any {
	kv := []any{"type", "gpu", "uuid", uuid}
	if clique != "" {
		kv = append(kv, "cliqueID", clique)
	}
	return kv
}

func TestWholeGPUsByNode(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{
		// Two free GPUs, one taken, one busy through a MIG partition.
		tray("t0", 1, map[string][]any{
			"gpu-0": gpuAttrs("u0", "c.1"), "gpu-1": gpuAttrs("u1", "c.1"),
			"gpu-2": gpuAttrs("u2", "c.1"), "gpu-3": gpuAttrs("u3", "c.1"),
			"gpu-3-mig-1g": {"type", "mig", "parentUUID", "u3"},
		}),
		// An older generation of t0's pool does not count.
		tray("t0", 0, map[string][]any{"gpu-9": gpuAttrs("u9", "c.9")}),
		// GPUs that disagree on their clique.
		tray("t1", 1, map[string][]any{"gpu-0": gpuAttrs("v0", "c.1"), "gpu-1": gpuAttrs("v1", "c.2")}),
		// No clique published; a NIC is not a GPU.
		tray("t2", 1, map[string][]any{"gpu-0": gpuAttrs("w0", ""), "nic-0": {"type", "nic"}}),
		// Network-attached: no node.
		{Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, Pool: resourceapi.ResourcePool{Name: "fabric"},
			Devices: []resourceapi.Device{{Name: "gpu-x", Attributes: attrs(gpuAttrs("x", "c.1")...)}}}},
		// Per-device node selection: each device names its node.
		{Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, Pool: resourceapi.ResourcePool{Name: "per-device", ResourceSliceCount: 1},
			PerDeviceNodeSelection: ptr.To(true), Devices: []resourceapi.Device{
				{Name: "gpu-0", NodeName: ptr.To("t3"), Attributes: attrs(gpuAttrs("y0", "c.3")...)},
				{Name: "gpu-1", NodeName: ptr.To("t3"), Attributes: attrs(gpuAttrs("y1", "c.3")...)},
			}}},
		// A uuid that t0's taken gpu-1 has too: another node's GPU, free.
		tray("t4", 1, map[string][]any{"gpu-0": gpuAttrs("u1", "")}),
		// A tray whose fabric holds only some of its GPUs is in no clique,
		// as the node agent sees it: a pod there could get a GPU outside.
		tray("t5", 1, map[string][]any{"gpu-0": gpuAttrs("z0", "c.5"), "gpu-1": gpuAttrs("z1", "")}),
		// Shared GPUs: no whole-GPU claim takes them.
		func() *resourceapi.ResourceSlice {
			s := tray("t6", 1, map[string][]any{"gpu-0": gpuAttrs("s0", "c.6"), "gpu-1": gpuAttrs("s1", "c.6")})
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].AllowMultipleAllocations = ptr.To(true)
			}
			return s
		}(),
		func() *resourceapi.ResourceSlice {
			s := tray("t7", 1, map[string][]any{"gpu-0": gpuAttrs("m0", "c.7"), "gpu-1": gpuAttrs("m1", "")})
			for i := range s.Spec.Devices {
				if s.Spec.Devices[i].Name == "gpu-1" {
					s.Spec.Devices[i].AllowMultipleAllocations = ptr.To(true)
				}
			}
			return s
		}(),
		// Taints that keep claims off a free GPU count it apart; a taken
		// GPU is not free, tainted or not; effect None keeps none off.
		func() *resourceapi.ResourceSlice {
			s := tray("t8", 1, map[string][]any{"gpu-0": gpuAttrs("h0", ""), "gpu-1": gpuAttrs("h1", ""), "gpu-2": gpuAttrs("h2", ""), "gpu-3": gpuAttrs("h3", "")})
			effects := map[string]resourceapi.DeviceTaintEffect{"gpu-0": resourceapi.DeviceTaintEffectNoExecute, "gpu-1": resourceapi.DeviceTaintEffectNoSchedule, "gpu-2": resourceapi.DeviceTaintEffectNone}
			for i := range s.Spec.Devices {
				if e, ok := effects[s.Spec.Devices[i].Name]; ok {
					s.Spec.Devices[i].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/xid", Effect: e}}
				}
			}
			return s
		}(),
		// A pool that publishes one of its two slices offers no device
		// (upstream's incomplete pool); so does one whose newer
		// generation is half published, though the older one is whole.
		ofTwo(tray("t9", 1, map[string][]any{"gpu-0": gpuAttrs("i0", "c.1")})),
		ofTwo(tray("t10", 1, map[string][]any{"gpu-0": gpuAttrs("j0", "c.1")})),
		ofTwo(tray("t10", 1, map[string][]any{"gpu-1": gpuAttrs("j1", "c.1")})),
		ofTwo(tray("t10", 2, map[string][]any{"gpu-0": gpuAttrs("j0", "c.1")})),
	}
	taken := func(driver, pool, device string) bool {
		return pool == "t0" && (device == "gpu-1" || device == "gpu-3-mig-1g") || pool == "t8" && device == "gpu-1"
	}
	got := WholeGPUsByNode(slices, taken)
	want := map[string]*NodeGPUs{
		"t0": {GPUs: 4, Free: 2, Clique: "c.1"},
		"t1": {GPUs: 2, Free: 2, Conflict: []string{"c.1", "c.2"}},
		"t2": {GPUs: 1, Free: 1},
		"t3": {GPUs: 2, Free: 2, Clique: "c.3"},
		"t4": {GPUs: 1, Free: 1},
		"t5": {GPUs: 2, Free: 2, Conflict: []string{"", "c.5"}},
		// In its clique, with no GPU a whole-GPU claim could take.
		"t6": {Clique: "c.6"},
		// One exclusive GPU in c.7, one shared in none: in no clique.
		"t7": {GPUs: 1, Free: 1, Conflict: []string{"", "c.7"}},
		"t8": {GPUs: 4, Free: 3, FreeTainted: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WholeGPUsByNode (-want +got):\n%s", diff)
	}
}
