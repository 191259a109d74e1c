package allocator

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// nicSlice: another driver's NICs on the node, publishing only the
// standard PCIe root and NUMA node, as RDMA NIC drivers do; every other
// one shares its bandwidth (consumable capacity).
func nicSlice(nodeName string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-nics"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "nic.example.com", NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName + "-nics", Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		d := resourceapi.Device{Name: fmt.Sprintf("nic-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"resource.kubernetes.io/pcieRoot": str(fmt.Sprintf("pci0000:%02x", i)),
			"resource.kubernetes.io/numaNode": num(int64(i / 2)),
		}}
		if i%2 == 1 {
			d.AllowMultipleAllocations = ptr.To(true)
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {Value: resource.MustParse("200G")}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

// Devices of another kind on the node (NICs that publish a PCIe root)
// are not GPUs to the measures of free GPUs: a GPU claim rates the same
// with or without them.
func TestOtherDevicesAreNotGPUs(t *testing.T) {
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	claims := []*resourceapi.ResourceClaim{claimOf("c", exact("gpu", gpuClass.Name, 2))}
	rate := func(slices ...*resourceapi.ResourceSlice) Quality {
		t.Helper()
		res, err := e.NewSession(NewInventory(slices, DefaultFeatures()), testClasses, emptyState(), claims).Allocate(context.Background(), node("n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Quality
	}
	alone, withNICs := rate(pairNode("n")), rate(pairNode("n"), nicSlice("n", 4))
	if withNICs.WholeGPUs != 8 || withNICs.Score != alone.Score || withNICs.PackingCost != alone.PackingCost || withNICs.Intactness != alone.Intactness {
		t.Errorf("with NICs: %d whole GPUs, score %v, packing cost %v, intactness %v; want 8 and as without them: %v, %v, %v",
			withNICs.WholeGPUs, withNICs.Score, withNICs.PackingCost, withNICs.Intactness, alone.Score, alone.PackingCost, alone.Intactness)
	}
}

// GPUs published with perDeviceNodeSelection, each naming its node, are
// on that node: an NVLink pair is still an NVLink pair, not GPUs across
// the network.
func TestPerDeviceNodeKeepsTheLinks(t *testing.T) {
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	claims := []*resourceapi.ResourceClaim{claimOf("c", exact("gpu", gpuClass.Name, 2))}
	perDevice := pairNode("n")
	perDevice.Spec.NodeName, perDevice.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
	for i := range perDevice.Spec.Devices {
		perDevice.Spec.Devices[i].NodeName = ptr.To("n")
	}
	for name, s := range map[string]*resourceapi.ResourceSlice{"slice node": pairNode("n"), "per-device node": perDevice} {
		res, err := e.NewSession(NewInventory([]*resourceapi.ResourceSlice{s}, DefaultFeatures()), testClasses, emptyState(), claims).Allocate(context.Background(), node("n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if q := res.Quality; q.WorstLink != topology.LinkNVLink || q.LinkSteps != 0 {
			t.Errorf("%s: worst link %s, %d steps below the best; want an NVLink pair", name, q.WorstLink, q.LinkSteps)
		}
	}
}
