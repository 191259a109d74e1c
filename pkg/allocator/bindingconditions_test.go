package allocator

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// A device with binding conditions (attached by a controller before the
// pod may start, KEP-5007) is taken only where no other fits, as
// upstream takes it: it searches such pools last. The policy would
// otherwise prefer a fabric GPU that leaves the node's NVLink pairs
// intact.
func TestBindingConditionDevicesLast(t *testing.T) {
	fabric := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, NodeName: ptr.To("node-a"),
			Pool: resourceapi.ResourcePool{Name: "fabric", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{
				Name: "attachable", BindsToNode: ptr.To(true),
				BindingConditions: []string{"attached"}, BindingFailureConditions: []string{"failed"},
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("gpu"), "uuid": str("GPU-fabric")},
			}},
		},
	}
	local := pairNode("node-a")
	allLocalTaken := emptyState()
	for _, d := range local.Spec.Devices {
		allLocalTaken.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", d.Name))
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	for _, tc := range []struct {
		name        string
		state       *AllocatedState
		wantBinding bool
	}{
		{name: "a local GPU free", state: emptyState()},
		{name: "every local GPU taken", state: allLocalTaken, wantBinding: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			slices := []*resourceapi.ResourceSlice{fabric, local}
			res, err := e.NewSession(NewInventory(slices, DefaultFeatures()), classList{gpuClass}, tc.state,
				[]*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}).Allocate(context.Background(), n, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Allocations[0].Devices.Results[0]
			if binding := len(got.BindingConditions) > 0; binding != tc.wantBinding {
				t.Errorf("allocated %s/%s (binding conditions %v), want binding conditions %v", got.Pool, got.Device, got.BindingConditions, tc.wantBinding)
			}
		})
	}
}
