package allocator

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// NVIDIA's own DRA driver (k8s-dra-driver-gpu, DynamicMIG) publishes a
// MIG GPU as one slice of counter sets and one slice per GPU: the whole
// GPU consuming its set, and every placement of every profile, named
// gpu-<g>-mig-<profile without dots>-<profile ID>-<start>. Its counters
// are streaming multiprocessors, engines, memory in bytes and one
// memory-slice-<i> per memory slice.

// nvidiaProfile is an H100 80GB profile as NVIDIA's driver counts it.
type nvidiaProfile struct {
	migProfile
	id, multiprocessors, engines int64
	memoryMiB                    int64
}

var h100NVIDIAProfiles = []nvidiaProfile{
	{a100Profiles[0], 19, 16, 1, 9856},
	{a100Profiles[1], 15, 16, 1, 19968},
	{a100Profiles[2], 14, 32, 2, 19968},
	{a100Profiles[3], 9, 60, 3, 40192},
	{a100Profiles[4], 5, 64, 4, 40192},
	{a100Profiles[5], 0, 132, 7, 80896},
}

func (p nvidiaProfile) counters(start int) map[string]resourceapi.Counter {
	n := func(v int64) resourceapi.Counter {
		return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.BinarySI)}
	}
	c := map[string]resourceapi.Counter{
		"multiprocessors": n(p.multiprocessors), "copy-engines": n(p.engines), "decoders": n(p.engines),
		"jpeg-engines": n(p.engines), "memory": n(p.memoryMiB << 20),
	}
	for i := start; i < start+p.memory; i++ {
		c[fmt.Sprintf("memory-slice-%d", i)] = n(1)
	}
	return c
}

// nvidiaMIGNode publishes one H100 as NVIDIA's driver does with
// DynamicMIG.
func nvidiaMIGNode(nodeName string) []*resourceapi.ResourceSlice {
	pool := resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 2}
	whole := h100NVIDIAProfiles[len(h100NVIDIAProfiles)-1]
	const set = "gpu-0-counter-set"
	counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-counters"},
		Spec: resourceapi.ResourceSliceSpec{Driver: drvNVIDIA, NodeName: ptr.To(nodeName), Pool: pool,
			SharedCounters: []resourceapi.CounterSet{{Name: set, Counters: whole.counters(0)}}}}
	devices := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-gpu-0"},
		Spec: resourceapi.ResourceSliceSpec{Driver: drvNVIDIA, NodeName: ptr.To(nodeName), Pool: pool}}
	uuid := "GPU-" + nodeName + "-0"
	devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{Name: "gpu-0",
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": str("gpu"), "uuid": str(uuid), "productName": str("NVIDIA H100 80GB HBM3")},
		ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: whole.counters(0)}}})
	for _, p := range h100NVIDIAProfiles {
		for _, start := range p.placements {
			devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{
				Name: fmt.Sprintf("gpu-0-mig-%s-%d-%d", strings.ReplaceAll(p.name, ".", ""), p.id, start),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"type": str("mig"), "parentUUID": str(uuid), "profile": str(p.name)},
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: p.counters(start)}},
			})
		}
	}
	return []*resourceapi.ResourceSlice{counters, devices}
}

// placementOf is a MIG device's profile and start, in either naming.
func placementOf(device string) string {
	i := strings.LastIndexByte(device, '-')
	profile := strings.ReplaceAll(strings.TrimPrefix(device[:i], "gpu-0-mig-"), ".", "")
	if j := strings.IndexByte(profile, '-'); j >= 0 { // NVIDIA's profile ID
		profile = profile[:j]
	}
	return profile + "@" + device[i+1:]
}

// TestMIGPlacementOnNVIDIADriverSlices: on a GPU published by NVIDIA's
// driver the engine places MIG profiles where it places them on the node
// agent's slices. Summing every counter's amounts let memory in bytes
// outweigh the rest: 3g.40gb and 4g.40gb read as one profile, all seven
// 1g.10gb placements scored alike, and the first one (start 0, the only
// start of 4g.40gb) was taken.
func TestMIGPlacementOnNVIDIADriverSlices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		name    string
		taken   []string // starts of 1g.10gb, 3g.40gb ... as placementOf writes them
		profile string
		count   int64
	}{
		{name: "one 1g.10gb on an empty GPU", profile: "1g.10gb", count: 1},
		{name: "two 1g.20gb on an empty GPU", profile: "1g.20gb", count: 2},
		{name: "one 2g.20gb on an empty GPU", profile: "2g.20gb", count: 1},
		{name: "2g.20gb beside a 1g.10gb at 6", taken: []string{"1g10gb@6"}, profile: "2g.20gb", count: 1},
		{name: "1g.20gb beside a 3g.40gb at 4", taken: []string{"3g40gb@4"}, profile: "1g.20gb", count: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			picked := map[string][]string{}
			for layout, published := range map[string][]*resourceapi.ResourceSlice{
				"node agent": migNode("node-a", 1), "NVIDIA's driver": nvidiaMIGNode("node-a"),
			} {
				state := emptyState()
				for _, s := range published {
					for _, d := range s.Spec.Devices {
						if strings.Contains(d.Name, "-mig-") && slices.Contains(tc.taken, placementOf(d.Name)) {
							state.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", d.Name))
						}
					}
				}
				e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
				if err != nil {
					t.Fatal(err)
				}
				claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", migClass.Name, tc.count,
					fmt.Sprintf(`device.attributes["gpu.nvidia.com"].profile == %q`, tc.profile)))}
				res, err := e.NewSession(NewInventory(published, DefaultFeatures()), testClasses, state, claims).Allocate(ctx, node("node-a"), nil)
				if err != nil {
					t.Fatalf("%s: %v", layout, err)
				}
				for _, r := range res.Allocations[0].Devices.Results {
					picked[layout] = append(picked[layout], placementOf(r.Device))
				}
			}
			if a, n := strings.Join(picked["node agent"], " "), strings.Join(picked["NVIDIA's driver"], " "); a != n {
				t.Errorf("placed at %s on NVIDIA's driver's slices, at %s on the node agent's", n, a)
			}
		})
	}
}
