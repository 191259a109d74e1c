package gputopology

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// The plugin's read of the claim tracker gives what upstream's full read
// gives, with DRAConsumableCapacity on and off: off, it skips copying the
// capacity ledger (as the in-tree plugin does), and a share counts as its
// whole device because the tracker recorded it so.
func TestGatherAllocatedStateFollowsTheGate(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(map[bool]string{true: "consumable capacity", false: "no consumable capacity"}[gate], func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAConsumableCapacity, gate)
			whole := claim("whole", 1).Obj()
			whole.Status.Allocation = allocatedOn("node-a", "gpu-0")
			shared := claim("shared", 1).Obj()
			shared.Status.Allocation = allocatedOn("node-a", "gpu-1")
			shared.Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("0f6a4b1c-3d2e-4f5a-9b8c-7d6e5f4a3b2c"))
			shared.Status.Allocation.Devices.Results[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}
			env := newTestEnv(t, objects{
				nodes:  []*v1.Node{node("node-a")},
				slices: []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
				claims: []*resourceapi.ResourceClaim{whole, shared},
			})
			counted := &countingDRAManager{SharedDRAManager: env.pl.draManager}
			got, err := GatherAllocatedState(env.tCtx, counted, env.pl.features.ConsumableCapacity)
			env.tCtx.ExpectNoError(err, "plugin's read")
			if full := counted.tracker.gathers > 0; full != gate {
				t.Errorf("full reads of the tracker: %d, lists of its devices: %d; want the full read only with the gate", counted.tracker.gathers, counted.tracker.lists)
			}
			want, err := env.pl.draManager.ResourceClaims().GatherAllocatedState()
			env.tCtx.ExpectNoError(err, "tracker's full read")
			gotTaken, wantTaken := TakenIn(got), TakenIn(want)
			for _, d := range []string{"gpu-0", "gpu-1", "gpu-2"} {
				if g, w := gotTaken(contract.DefaultDriver, "node-a", d), wantTaken(contract.DefaultDriver, "node-a", d); g != w {
					t.Errorf("%s taken: %v, upstream's full read %v", d, g, w)
				}
			}
			gpu1 := structured.MakeDeviceID(contract.DefaultDriver, "node-a", "gpu-1")
			if gate != (got.AggregatedCapacity[gpu1] != nil) {
				t.Errorf("consumed capacity of gpu-1 read: %v, want %v", got.AggregatedCapacity[gpu1] != nil, gate)
			}
			if !gate && !got.AllocatedDevices.Has(gpu1) {
				t.Errorf("without consumable capacity the share of gpu-1 does not hold the device: %v", got.AllocatedDevices)
			}
		})
	}
}

// countingDRAManager counts how the claim tracker is read.
type countingDRAManager struct {
	fwk.SharedDRAManager
	tracker countingTracker
}

func (m *countingDRAManager) ResourceClaims() fwk.ResourceClaimTracker {
	m.tracker.ResourceClaimTracker = m.SharedDRAManager.ResourceClaims()
	return &m.tracker
}

type countingTracker struct {
	fwk.ResourceClaimTracker
	gathers, lists int
}

func (c *countingTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	c.gathers++
	return c.ResourceClaimTracker.GatherAllocatedState()
}

func (c *countingTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	c.lists++
	return c.ResourceClaimTracker.ListAllAllocatedDevices()
}
