package allocator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/manifests"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// The engine allocates as upstream does on what the node agent publishes
// and with the DeviceClasses the manifests install: MIG partitions with
// one counter per memory slice and the whole GPU consuming them all, and
// shared GPUs with the agent's capacity request policy, asked for as
// users ask (profiles, partition sizes, capacity, several per claim,
// parent constraints), over a ledger of partitions and shares in use.
// The generated problems of differential_test.go have shapes of their
// own; this follows the agent's whenever it changes.
func TestDifferentialNodeAgentShapes(t *testing.T) {
	mig := append(agentSlices(t, "mig-0", config.MIG, 2), agentSlices(t, "mig-1", config.MIG, 1)...)
	shared := agentSlices(t, "shared-0", config.Shared, 2)
	all := append(append([]*resourceapi.ResourceSlice{}, mig...), shared...)
	classes := shippedClasses(t)
	counts := map[outcome]int{}
	for seed := range uint64(1000) {
		r := rand.New(rand.NewPCG(seed, 77))
		node := []string{"mig-0", "mig-1", "shared-0"}[r.IntN(3)]
		p := &problem{features: DefaultFeatures(), node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, classes: classes, slices: all,
			state: agentLedger(r, all)}
		for ci := range 1 + r.IntN(2) {
			p.claims = append(p.claims, agentClaim(r, ci, node == "shared-0"))
		}
		_, o, _ := upstreamAllocate(p)
		counts[o]++
		if err := checkAgainstUpstream(p); err != nil {
			t.Fatalf("seed %d, node %s: %v", seed, node, err)
		}
	}
	if counts[outcomeOK] < 100 || counts[outcomeNone] < 100 {
		t.Errorf("outcomes %v: want many of both allocated and unsatisfiable", counts)
	}
}

// agentSlices are the slices the node agent publishes for the first gpus
// GPUs of a DGX H100 in mode.
func agentSlices(t *testing.T, node string, mode config.Mode, gpus int) []*resourceapi.ResourceSlice {
	t.Helper()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{MIG: mode == config.MIG, Name: node})
	if err != nil {
		t.Fatal(err)
	}
	found, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DefaultMode = mode
	l, err := resources.NewLayout(node, found[:gpus], cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceSlices()
}

// shippedClasses are the DeviceClasses of manifests/scheduler/deviceclasses.
func shippedClasses(t *testing.T) classList {
	t.Helper()
	var out classList
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests.DeviceClasses), 4096)
	for {
		var dc resourceapi.DeviceClass
		if err := dec.Decode(&dc); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if dc.Name != "" {
			out = append(out, &dc)
		}
	}
}

// agentLedger marks about one device in ten in use: shares of shared GPUs
// with some of their memory and compute, and MIG partitions as long as
// their GPU's counters allow (never the whole GPU, so that the ledger is
// one a scheduler could have left).
func agentLedger(r *rand.Rand, slices []*resourceapi.ResourceSlice) *AllocatedState {
	st := &AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	used := map[string]map[string]int64{}
	for _, s := range slices {
		for i, d := range s.Spec.Devices {
			if r.IntN(10) != 0 {
				continue
			}
			id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
			switch {
			case ptr.Deref(d.AllowMultipleAllocations, false):
				uid := types.UID(fmt.Sprintf("%s-%d", s.Spec.Pool.Name, i))
				st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &uid))
				st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, map[resourceapi.QualifiedName]resource.Quantity{
					contract.CapacityMemory:  resource.MustParse([]string{"8Gi", "40Gi", "70Gi"}[r.IntN(3)]),
					contract.CapacityCompute: resource.MustParse([]string{"10", "50", "95"}[r.IntN(3)])}))
			case len(d.ConsumesCounters) > 0 && d.Attributes[contract.AttrType].StringValue != nil && *d.Attributes[contract.AttrType].StringValue == contract.TypeMIG:
				cc := d.ConsumesCounters[0]
				set := s.Spec.Pool.Name + "/" + cc.CounterSet
				if fitsCounters(used[set], cc.Counters) {
					if used[set] == nil {
						used[set] = map[string]int64{}
					}
					for n, c := range cc.Counters {
						used[set][n] += c.Value.Value()
					}
					st.AllocatedDevices.Insert(id)
				}
			}
		}
	}
	return st
}

// fitsCounters: a MIG GPU has 7 compute slices and one of each memory
// slice.
func fitsCounters(used map[string]int64, want map[string]resourceapi.Counter) bool {
	for n, c := range want {
		limit := int64(1)
		if n == contract.CounterCompute {
			limit = 7
		}
		if used[n]+c.Value.Value() > limit {
			return false
		}
	}
	return true
}

// agentClaim is a claim of one or two requests for MIG partitions (or
// whole GPUs) or shares, maybe with a constraint on their GPU.
func agentClaim(r *rand.Rand, i int, shares bool) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("u%d", i))}}
	attr := contract.DefaultDriver + "/" + contract.AttrParentUUID
	for ri := range 1 + r.IntN(2) {
		name := fmt.Sprintf("r%d", ri)
		if shares {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, shareRequest(r, name))
			attr = contract.DefaultDriver + "/" + contract.AttrUUID
		} else {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, partitionRequest(r, name))
		}
	}
	switch r.IntN(4) {
	case 0:
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(attr))}}
	case 1:
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(attr))}}
	}
	return c
}

// partitionRequest asks for H100 partitions by profile, partition size or
// memory, or for a whole GPU, sometimes with capacity, All or a fallback.
func partitionRequest(r *rand.Rand, name string) resourceapi.DeviceRequest {
	profile := []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}[r.IntN(6)]
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: contract.ClassMIG, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(1 + r.IntN(2))}
	switch r.IntN(4) {
	case 0:
		e.Selectors = []resourceapi.DeviceSelector{celSel(fmt.Sprintf(`device.attributes['gpu.nvidia.com'].profile == '%s'`, profile))}
	case 1:
		e.Selectors = []resourceapi.DeviceSelector{celSel(fmt.Sprintf(`device.attributes['gpu.nvidia.com'].partitionSize == '%s'`, profile))}
	case 2:
		e.Selectors = []resourceapi.DeviceSelector{celSel(fmt.Sprintf(`device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('%s')) >= 0`, []string{"10Gi", "20Gi", "40Gi"}[r.IntN(3)]))}
	default:
		e.DeviceClassName, e.Count = contract.ClassGPU, 1
	}
	if r.IntN(4) == 0 {
		e.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			contract.CapacityMemory: resource.MustParse([]string{"20Gi", "41Gi", "10G"}[r.IntN(3)])}}
		if r.IntN(3) == 0 {
			e.Capacity.Requests[contract.CapacityMultiprocessors] = resource.MustParse("40")
		}
	}
	return withVariants(r, name, e, contract.ClassMIG)
}

// shareRequest asks for shares with memory and compute, some not
// multiples of the step, some more than a GPU has, some with none.
func shareRequest(r *rand.Rand, name string) resourceapi.DeviceRequest {
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: contract.ClassSharedGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(1 + r.IntN(2))}
	if r.IntN(4) > 0 {
		req := map[resourceapi.QualifiedName]resource.Quantity{}
		if r.IntN(3) > 0 {
			req[contract.CapacityMemory] = resource.MustParse([]string{"20Gi", "1500Mi", "100Gi", "20G", "81Gi", "79Gi", "40Gi", "512Mi", "8Gi"}[r.IntN(9)])
		}
		if r.IntN(2) == 0 {
			req[contract.CapacityCompute] = resource.MustParse([]string{"33", "12500m", "150", "100", "50", "1m"}[r.IntN(6)])
		}
		e.Capacity = &resourceapi.CapacityRequirements{Requests: req}
	}
	return withVariants(r, name, e, contract.ClassSharedGPU)
}

// withVariants makes one request in ten All, and one in five a
// firstAvailable with one device of fallback as its second choice.
func withVariants(r *rand.Rand, name string, e *resourceapi.ExactDeviceRequest, fallback string) resourceapi.DeviceRequest {
	if r.IntN(10) == 0 {
		e.AllocationMode, e.Count = resourceapi.DeviceAllocationModeAll, 0
	}
	if r.IntN(5) == 0 {
		return resourceapi.DeviceRequest{Name: name, FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "a", DeviceClassName: e.DeviceClassName, Selectors: e.Selectors, AllocationMode: e.AllocationMode, Count: e.Count, Capacity: e.Capacity},
			{Name: "b", DeviceClassName: fallback, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: e}
}
