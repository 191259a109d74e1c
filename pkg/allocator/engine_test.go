package allocator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// Table-driven tests of allocation semantics. Every case also runs
// upstream's allocator on the same input and requires the same outcome.

func plainDevice(name string, attrs map[string]resourceapi.DeviceAttribute) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for k, v := range attrs {
		d.Attributes[resourceapi.QualifiedName(k)] = v
	}
	return d
}

func localSlice(nodeName, pool string, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-slice"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, NodeName: ptr.To(nodeName),
			Pool:    resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			Devices: devs,
		},
	}
}

func fourGPUs() *resourceapi.ResourceSlice {
	return localSlice("node-a", "node-a",
		plainDevice("gpu-0", map[string]resourceapi.DeviceAttribute{"type": str("gpu"), "model": str("a100"), "memory": num(40960)}),
		plainDevice("gpu-1", map[string]resourceapi.DeviceAttribute{"type": str("gpu"), "model": str("h100"), "memory": num(81920)}),
		plainDevice("gpu-2", map[string]resourceapi.DeviceAttribute{"type": str("gpu"), "model": str("a100"), "memory": num(81920)}),
		plainDevice("gpu-3", map[string]resourceapi.DeviceAttribute{"type": str("gpu"), "model": str("h100"), "memory": num(81920)}),
	)
}

// fortyGPUs is one node's pool of 40 A100s: more than a claim may hold.
func fortyGPUs() *resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for i := range 40 {
		devs = append(devs, plainDevice(fmt.Sprintf("gpu-%d", i), map[string]resourceapi.DeviceAttribute{"type": str("gpu"), "model": str("a100")}))
	}
	return localSlice("node-a", "node-a", devs...)
}

func withConstraint(c *resourceapi.ResourceClaim, con resourceapi.DeviceConstraint) *resourceapi.ResourceClaim {
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, con)
	return c
}

func firstAvailable(name string, subs ...resourceapi.DeviceSubRequest) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, FirstAvailable: subs}
}

func sub(name, className string, count int64, selectors ...string) resourceapi.DeviceSubRequest {
	s := resourceapi.DeviceSubRequest{Name: name, DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, e := range selectors {
		s.Selectors = append(s.Selectors, celSel(e))
	}
	return s
}

func allOf(name, className string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeAll}}
}

func holding(names ...string) *AllocatedState {
	s := emptyState()
	for _, n := range names {
		s.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", n))
	}
	return s
}

func TestAllocateSemantics(t *testing.T) {
	anyClass := class("any")
	classes := classList{gpuClass, migClass, sharedClass, anyClass,
		class("broken", `device.attributes[`),
		class("strict", `device.attributes["gpu.nvidia.com"].missing == 1`),
		{ObjectMeta: metav1.ObjectMeta{Name: "configured"}, Spec: resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaque(drvNVIDIA, "from-class")}}}},
	}
	memAtLeast40G := `device.attributes["gpu.nvidia.com"].memory >= 40000`
	tainted := fourGPUs()
	tainted.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	tainted.Spec.Devices[1].Taints = []resourceapi.DeviceTaint{{Key: "info", Effect: resourceapi.DeviceTaintEffectNone}}
	dup := fourGPUs()
	dup.Spec.Devices[3].Name = "gpu-0"
	incomplete := fourGPUs()
	incomplete.Spec.Pool.ResourceSliceCount = 2
	badCounters := migNode("node-a", 1)
	badCounters[1].Spec.Devices[3].ConsumesCounters[0].CounterSet = "no-such-set"
	negCounters := migNode("node-a", 1)
	negCounters[0].Spec.SharedCounters[0].Counters["compute"] = resourceapi.Counter{Value: resource.MustParse("-1")}
	perDevice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, PerDeviceNodeSelection: ptr.To(true),
			Pool: resourceapi.ResourcePool{Name: "fabric", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{
				{Name: "link-b", NodeName: ptr.To("node-b"), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("gpu")}},
				{Name: "link-all", AllNodes: ptr.To(true), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("gpu")}},
			},
		},
	}
	binding := fourGPUs()
	binding.Spec.Pool.Name = "aaa-first-by-name"
	binding.Spec.Devices = binding.Spec.Devices[:1]
	binding.Spec.Devices[0].BindingConditions = []string{"attached"}
	binding.Spec.Devices[0].BindingFailureConditions = []string{"failed"}
	configured := claimOf("c", exact("r", "configured", 1), exact("s", "configured", 1))
	configured.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"r"}, DeviceConfiguration: opaque(drvNVIDIA, "from-claim")}}

	tests := []struct {
		name    string
		slices  []*resourceapi.ResourceSlice
		state   *AllocatedState
		claims  []*resourceapi.ResourceClaim
		want    []string // devices of all claims, in result order
		wantErr error
		// errHas: words the error must contain (object and field names).
		errHas []string
		check  func(t *testing.T, res []resourceapi.AllocationResult)
		// noUpstream: upstream panics on this input (nil Exactly).
		noUpstream bool
	}{
		{name: "exact count", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 2))}, want: []string{"gpu-0", "gpu-1"}},
		{name: "request selector", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1, memAtLeast40G+` && device.attributes["gpu.nvidia.com"].model == "h100"`))}, want: []string{"gpu-1"}},
		{name: "devices in use are skipped", slices: []*resourceapi.ResourceSlice{fourGPUs()}, state: holding("gpu-0", "gpu-1"), claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 2))}, want: []string{"gpu-2", "gpu-3"}},
		{name: "too few devices", slices: []*resourceapi.ResourceSlice{fourGPUs()}, state: holding("gpu-0"), claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 4))}, wantErr: ErrUnsatisfiable},
		{name: "two claims never share a device", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("a", exact("r", gpuClass.Name, 2)), claimOf("b", exact("r", gpuClass.Name, 2))}, want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{name: "all devices", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", allOf("r", gpuClass.Name))}, want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{name: "all devices, one in use", slices: []*resourceapi.ResourceSlice{fourGPUs()}, state: holding("gpu-2"), claims: []*resourceapi.ResourceClaim{claimOf("c", allOf("r", gpuClass.Name))}, wantErr: ErrUnsatisfiable},
		{name: "all devices of an incomplete pool", slices: []*resourceapi.ResourceSlice{incomplete}, claims: []*resourceapi.ResourceClaim{claimOf("c", allOf("r", gpuClass.Name))}, wantErr: ErrInvalidInput, errHas: []string{"being updated"}},
		{name: "incomplete pool is skipped for exact counts", slices: []*resourceapi.ResourceSlice{incomplete}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, wantErr: ErrUnsatisfiable, errHas: []string{"being updated"}},
		{name: "first available: preferred alternative", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", firstAvailable("r", sub("big", gpuClass.Name, 1, `device.attributes["gpu.nvidia.com"].memory >= 80000`), sub("two", gpuClass.Name, 2)))}, want: []string{"gpu-1"},
			check: func(t *testing.T, res []resourceapi.AllocationResult) {
				if r := res[0].Devices.Results[0].Request; r != "r/big" {
					t.Errorf("request %q, want r/big", r)
				}
			}},
		{name: "first available: fallback", slices: []*resourceapi.ResourceSlice{fourGPUs()}, state: holding("gpu-1", "gpu-2", "gpu-3"), claims: []*resourceapi.ResourceClaim{claimOf("c", firstAvailable("r", sub("big", gpuClass.Name, 1, `device.attributes["gpu.nvidia.com"].memory >= 80000`), sub("small", gpuClass.Name, 1)))}, want: []string{"gpu-0"}},
		{name: "matchAttribute", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{withConstraint(claimOf("c", exact("a", gpuClass.Name, 1), exact("b", gpuClass.Name, 1, `device.attributes["gpu.nvidia.com"].model == "h100"`)), resourceapi.DeviceConstraint{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.nvidia.com/model"))})}, want: []string{"gpu-1", "gpu-3"}},
		{name: "distinctAttribute", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{withConstraint(claimOf("c", exact("a", gpuClass.Name, 2)), resourceapi.DeviceConstraint{DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.nvidia.com/model"))})}, want: []string{"gpu-0", "gpu-1"}},
		{name: "matchAttribute unsatisfiable", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{withConstraint(claimOf("c", exact("a", gpuClass.Name, 3)), resourceapi.DeviceConstraint{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.nvidia.com/model"))})}, wantErr: ErrUnsatisfiable,
			errHas: []string{"needs 3, 4 match, 4 free; enough free devices match each request, but no combination of them satisfies matchAttribute gpu.nvidia.com/model)"}},
		{name: "a request that fits the node, not a claim's limit", slices: []*resourceapi.ResourceSlice{fortyGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c",
			firstAvailable("b", sub("big", gpuClass.Name, 33), sub("small", gpuClass.Name, 8, `device.attributes["gpu.nvidia.com"].model == "h100"`)))},
			wantErr: ErrUnsatisfiable, errHas: []string{"needs 33, 40 match, 40 free", "no combination of them satisfies the limit of 32 devices a claim may hold)"}},
		{name: "MIG requests that fit alone, not together", slices: migNode("node-a", 1), claims: []*resourceapi.ResourceClaim{claimOf("c",
			exact("big", migClass.Name, 2, `device.attributes["gpu.nvidia.com"].profile == "3g.40gb"`), exact("small", migClass.Name, 1, `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`))},
			wantErr: ErrUnsatisfiable, errHas: []string{"needs 2, 2 match, 2 free", "needs 1, 7 match, 7 free", "no combination of them satisfies the shared counters they consume)"}},
		{name: "admin access may use allocated devices", slices: []*resourceapi.ResourceSlice{fourGPUs()}, state: holding("gpu-0", "gpu-1", "gpu-2", "gpu-3"), claims: []*resourceapi.ResourceClaim{claimOf("c", func() resourceapi.DeviceRequest {
			r := exact("r", gpuClass.Name, 1)
			r.Exactly.AdminAccess = ptr.To(true)
			return r
		}())}, want: []string{"gpu-0"}, check: func(t *testing.T, res []resourceapi.AllocationResult) {
			if !ptr.Deref(res[0].Devices.Results[0].AdminAccess, false) {
				t.Error("adminAccess not set in the result")
			}
		}},
		{name: "NoSchedule taint blocks, None does not", slices: []*resourceapi.ResourceSlice{tainted}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, want: []string{"gpu-1"}},
		{name: "tolerated taint", slices: []*resourceapi.ResourceSlice{tainted}, claims: []*resourceapi.ResourceClaim{claimOf("c", func() resourceapi.DeviceRequest {
			r := exact("r", gpuClass.Name, 1)
			r.Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "xid", Operator: resourceapi.DeviceTolerationOpExists}}
			return r
		}())}, want: []string{"gpu-0"}},
		{name: "NoExecute taint blocks", slices: []*resourceapi.ResourceSlice{func() *resourceapi.ResourceSlice {
			s := fourGPUs()
			s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "maintenance", Effect: resourceapi.DeviceTaintEffectNoExecute}}
			return s
		}()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, want: []string{"gpu-1"}},
		{name: "overlapping partitions are never double-booked", slices: migNode("node-a", 1), state: func() *AllocatedState {
			s := emptyState()
			s.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-0-mig-4g.40gb-0"))
			return s
		}(), claims: []*resourceapi.ResourceClaim{migClaim("c", "3g.40gb"), migClaim("d", "3g.40gb")}, wantErr: ErrUnsatisfiable},
		{name: "partitions fill the GPU exactly", slices: migNode("node-a", 1), claims: []*resourceapi.ResourceClaim{migClaim("a", "4g.40gb"), migClaim("b", "3g.40gb")}, want: []string{"gpu-0-mig-4g.40gb-0", "gpu-0-mig-3g.40gb-4"}},
		{name: "whole GPU blocked by a partition", slices: migNode("node-a", 1), state: func() *AllocatedState {
			s := emptyState()
			s.AllocatedDevices.Insert(structured.MakeDeviceID(drvNVIDIA, "node-a", "gpu-0-mig-1g.10gb-3"))
			return s
		}(), claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, wantErr: ErrUnsatisfiable},
		{name: "per-device node selection", slices: []*resourceapi.ResourceSlice{perDevice}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, want: []string{"link-all"},
			check: func(t *testing.T, res []resourceapi.AllocationResult) {
				if res[0].NodeSelector != nil {
					t.Errorf("device on all nodes: node selector %v, want none", res[0].NodeSelector)
				}
			}},
		{name: "shared GPU: shares until capacity", slices: []*resourceapi.ResourceSlice{sharedNode("node-a", 1)}, claims: []*resourceapi.ResourceClaim{sharedClaim("a", "40Gi"), sharedClaim("b", "30Gi"), sharedClaim("c", "10Gi")}, want: []string{"gpu-0", "gpu-0", "gpu-0"}},
		{name: "shared GPU: over capacity", slices: []*resourceapi.ResourceSlice{sharedNode("node-a", 1)}, claims: []*resourceapi.ResourceClaim{sharedClaim("a", "40Gi"), sharedClaim("b", "30Gi"), sharedClaim("c", "10.5Gi")}, wantErr: ErrUnsatisfiable},
		{name: "binding conditions: pool sorted last, conditions copied", slices: []*resourceapi.ResourceSlice{binding, fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", allOf("r", gpuClass.Name))}, want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-0"},
			check: func(t *testing.T, res []resourceapi.AllocationResult) {
				last := res[0].Devices.Results[4]
				if last.Pool != "aaa-first-by-name" || !slices.Equal(last.BindingConditions, []string{"attached"}) {
					t.Errorf("last result %+v: want the binding-conditions pool with its conditions", last)
				}
			}},
		{name: "configs from class and claim", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{configured}, want: []string{"gpu-0", "gpu-1"},
			check: func(t *testing.T, res []resourceapi.AllocationResult) {
				want := []resourceapi.DeviceAllocationConfiguration{
					{Source: resourceapi.AllocationConfigSourceClass, DeviceConfiguration: opaque(drvNVIDIA, "from-class")},
					{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"r"}, DeviceConfiguration: opaque(drvNVIDIA, "from-claim")},
				}
				if diff := cmp.Diff(want, res[0].Devices.Config, cmp.Comparer(func(a, b runtime.RawExtension) bool { return string(a.Raw) == string(b.Raw) })); diff != "" {
					t.Errorf("config (-want +got):\n%s", diff)
				}
			}},
		{name: "node-local devices pin the node", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, want: []string{"gpu-0"},
			check: func(t *testing.T, res []resourceapi.AllocationResult) {
				ns := res[0].NodeSelector
				if ns == nil || ns.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-a" {
					t.Errorf("node selector %v, want metadata.name in [node-a]", ns)
				}
			}},
		{name: "missing class", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", "nope", 1))}, wantErr: ErrInvalidInput, errHas: []string{"default/c", "request r", "nope"}},
		{name: "CEL compile error", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", "broken", 1))}, wantErr: ErrInvalidInput, errHas: []string{"class broken", "selector #0", "compile"}},
		{name: "CEL runtime error", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", "strict", 1))}, wantErr: ErrInvalidInput, errHas: []string{"class strict", "gpu-0", "runtime error"}},
		{name: "non-matching selector is no error", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1, `device.attributes["gpu.nvidia.com"].model == "b200"`))}, wantErr: ErrUnsatisfiable},
		{name: "request without exactly or firstAvailable", slices: []*resourceapi.ResourceSlice{fourGPUs()}, claims: []*resourceapi.ResourceClaim{claimOf("c", resourceapi.DeviceRequest{Name: "r"})}, noUpstream: true, wantErr: ErrInvalidInput, errHas: []string{"default/c", "request r", "neither exactly nor firstAvailable"}},
		{name: "duplicate device names", slices: []*resourceapi.ResourceSlice{dup}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1))}, wantErr: ErrInvalidPool, errHas: []string{"node-a-slice", "gpu-0", "duplicate"}},
		{name: "unknown counter set", slices: badCounters, claims: []*resourceapi.ResourceClaim{migClaim("c", "7g.80gb")}, wantErr: ErrInvalidPool, errHas: []string{"node-a-devices", "gpu-0-mig-1g.10gb-2", "no-such-set"}},
		{name: "negative capacity", slices: []*resourceapi.ResourceSlice{func() *resourceapi.ResourceSlice {
			s := sharedNode("node-a", 1)
			c := s.Spec.Devices[0].Capacity["memory"]
			c.Value = resource.MustParse("-1Gi")
			c.RequestPolicy = nil
			s.Spec.Devices[0].Capacity["memory"] = c
			return s
		}()}, claims: []*resourceapi.ResourceClaim{claimOf("c", exact("r", sharedClass.Name, 1))}, wantErr: ErrInvalidInput, errHas: []string{"node-a-shared", "gpu-0", "negative"}},
		{name: "shared GPU: valid values round up", slices: []*resourceapi.ResourceSlice{func() *resourceapi.ResourceSlice {
			s := sharedNode("node-a", 1)
			c := s.Spec.Devices[0].Capacity["memory"]
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("10Gi")), ValidValues: []resource.Quantity{resource.MustParse("10Gi"), resource.MustParse("20Gi"), resource.MustParse("40Gi")}}
			s.Spec.Devices[0].Capacity["memory"] = c
			return s
		}()}, claims: []*resourceapi.ResourceClaim{sharedClaim("a", "15Gi"), sharedClaim("b", "30Gi")}, want: []string{"gpu-0", "gpu-0"},
			check: func(t *testing.T, res []resourceapi.AllocationResult) {
				for i, want := range []string{"20Gi", "40Gi"} {
					got := res[i].Devices.Results[0].ConsumedCapacity["memory"]
					if got.Cmp(resource.MustParse(want)) != 0 {
						t.Errorf("claim %d consumed %s, want %s", i, got.String(), want)
					}
				}
			}},
		// A negative total is valid input: upstream keeps the pool valid
		// and allocates no device that consumes its counters.
		// Each request finds enough alone; the message says that together
		// they do not (two containers' extended-resource requests, say).
		{name: "requests that fit alone but not together", slices: []*resourceapi.ResourceSlice{fourGPUs()},
			claims:  []*resourceapi.ResourceClaim{claimOf("c", exact("a", gpuClass.Name, 3), exact("b", gpuClass.Name, 3))},
			wantErr: ErrUnsatisfiable, errHas: []string{"request a: needs 3, 4 match, 4 free", "the 2 requests need 6 devices together, 4 free match any of them"}},
		// Asking for more than a device has is no wait for it to be freed.
		{name: "shared GPU: request larger than the device", slices: []*resourceapi.ResourceSlice{sharedNode("node-a", 2)},
			claims:  []*resourceapi.ResourceClaim{sharedClaim("c", "1Ti")},
			wantErr: ErrUnsatisfiable, errHas: []string{"needs 1, 2 match, 0 free (2 capacity below the request)"}},
		{name: "shared GPU: a capacity the device does not have", slices: []*resourceapi.ResourceSlice{sharedNode("node-a", 2)},
			claims: []*resourceapi.ResourceClaim{func() *resourceapi.ResourceClaim {
				c := sharedClaim("c", "1Gi")
				c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["bandwidth"] = resource.MustParse("1")
				return c
			}()},
			wantErr: ErrUnsatisfiable, errHas: []string{"needs 1, 2 match, 0 free (2 capacity not offered as requested)"}},
		{name: "negative counter", slices: negCounters, claims: []*resourceapi.ResourceClaim{migClaim("c", "1g.10gb")}, wantErr: ErrUnsatisfiable, errHas: []string{"shared counters exhausted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			state := tc.state
			if state == nil {
				state = emptyState()
			}
			n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.NewSession(NewInventory(tc.slices, DefaultFeatures()), classes, state, tc.claims).Allocate(ctx, n, nil)

			// Upstream must agree on the outcome.
			up, upErr := outcomeOK, error(nil)
			if !tc.noUpstream {
				up, upErr = upstreamOutcome(t, tc.slices, classes, state, tc.claims, n)
			}
			switch {
			case tc.noUpstream:
			case tc.wantErr == nil && up != outcomeOK,
				errors.Is(tc.wantErr, ErrUnsatisfiable) && up != outcomeNone,
				errors.Is(tc.wantErr, ErrInvalidPool) && up != outcomeInvalidPool && !strings.Contains(tc.name, "negative"),
				errors.Is(tc.wantErr, ErrInvalidInput) && up != outcomeError:
				t.Errorf("upstream outcome %s (%v) does not match the expectation", up, upErr)
			}

			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				for _, w := range tc.errHas {
					if !strings.Contains(errorText(err), w) {
						t.Errorf("error %q does not mention %q", errorText(err), w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, deviceNames(res.Allocations)); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, res.Allocations)
			}
		})
	}
}

func upstreamOutcome(t *testing.T, sl []*resourceapi.ResourceSlice, classes classList, state *AllocatedState, claims []*resourceapi.ResourceClaim, n *v1.Node) (outcome, error) {
	t.Helper()
	p := &problem{features: DefaultFeatures(), node: n, slices: sl, classes: classes, state: state, claims: claims}
	_, out, err := upstreamAllocate(p)
	return out, err
}

func TestInventoryRefreshKeepsUnchangedDevices(t *testing.T) {
	a, b := pairNode("node-a"), pairNode("node-b")
	inv := NewInventory([]*resourceapi.ResourceSlice{a, b}, DefaultFeatures())
	da, db := inv.devicesOf(a), inv.devicesOf(b)
	b2 := b.DeepCopy()
	next := inv.Refresh([]*resourceapi.ResourceSlice{a, b2})
	if got := next.devicesOf(a); &got[0] != &da[0] && got[0] != da[0] {
		t.Error("unchanged slice lost its device objects")
	}
	if got := next.devicesOf(b2); got[0] == db[0] {
		t.Error("changed slice kept stale device objects")
	}
	if len(next.Slices()) != 2 {
		t.Errorf("slices %d, want 2", len(next.Slices()))
	}
}

// A node's view survives status updates and follows label changes when
// slices select the node by label.
func TestInventoryViewFollowsNodeLabels(t *testing.T) {
	net := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNVIDIA, Pool: resourceapi.ResourcePool{Name: "fabric", Generation: 1, ResourceSliceCount: 1},
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{"r1"}}}}}},
			Devices:      []resourceapi.Device{plainDevice("nic", map[string]resourceapi.DeviceAttribute{"type": str("gpu")})},
		},
	}
	inv := NewInventory([]*resourceapi.ResourceSlice{net, pairNode("node-a")}, DefaultFeatures())
	n := node("node-a")
	n.ResourceVersion = "1"
	v1view, err := inv.view(n)
	if err != nil {
		t.Fatal(err)
	}
	if len(v1view.devices) != 8 {
		t.Fatalf("%d devices, want the 8 GPUs", len(v1view.devices))
	}
	n2 := n.DeepCopy()
	n2.ResourceVersion = "2" // a status update
	if v, _ := inv.view(n2); v != v1view {
		t.Error("status update rebuilt the view")
	}
	n3 := n2.DeepCopy()
	n3.Labels["rack"] = "r1"
	v3, err := inv.view(n3)
	if err != nil {
		t.Fatal(err)
	}
	if len(v3.devices) != 9 {
		t.Errorf("%d devices after the label change, want 9 (the rack's NIC too)", len(v3.devices))
	}
	if len(inv.views) != 1 {
		t.Errorf("%d cached views, want one per node", len(inv.views))
	}
}

// The engine must not propose a device that an earlier pod holds, across
// pods allocated one after the other (each result committed to the state,
// as the scheduler's claim tracker does).
func TestSequentialPodsNeverShareDevices(t *testing.T) {
	state := emptyState()
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory([]*resourceapi.ResourceSlice{pairNode("node-a")}, DefaultFeatures())
	seen := map[string]bool{}
	for i := range 4 {
		c := claimOf(string(rune('a'+i)), exact("r", gpuClass.Name, 2))
		res, err := e.NewSession(inv, testClasses, state, []*resourceapi.ResourceClaim{c}).Allocate(t.Context(), node("node-a"), nil)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		commit(state, res.Allocations)
		for _, d := range deviceNames(res.Allocations) {
			if seen[d] {
				t.Fatalf("device %s allocated twice", d)
			}
			seen[d] = true
		}
		if !res.Quality.MultiDevice || res.Quality.WorstLink.String() != "nvlink" {
			t.Errorf("pod %d: %v, want an NVLink pair", i, res.Quality)
		}
	}
	c := claimOf("e", exact("r", gpuClass.Name, 1))
	if _, err := e.NewSession(inv, testClasses, state, []*resourceapi.ResourceClaim{c}).Allocate(t.Context(), node("node-a"), nil); !errors.Is(err, ErrUnsatisfiable) {
		t.Errorf("full node: %v, want ErrUnsatisfiable", err)
	}
}

// The clause for requests together appears only where it is the reason:
// each request fits alone, their devices are taken whole, and together
// they need more than are free.
func TestJointDemandFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    jointDemand
		want string
	}{
		{"too many together", jointDemand{requests: 2, need: 6, freeCount: 4, fits: true}, "the 2 requests need 6 devices together, 4 free match any of them"},
		{"enough together", jointDemand{requests: 2, need: 4, freeCount: 4, fits: true}, ""},
		{"one short alone", jointDemand{requests: 2, need: 6, freeCount: 4, fits: false}, ""},
		{"shared devices", jointDemand{requests: 2, need: 6, freeCount: 4, fits: true, shared: true}, ""},
		{"one request", jointDemand{requests: 1, need: 6, freeCount: 4, fits: true}, ""},
	} {
		if got := tc.j.failure(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// errorText is err's text, with an invalid pool's names (which its text
// leaves for the log) after it.
func errorText(err error) string {
	var pe *InvalidPoolError
	if errors.As(err, &pe) {
		return err.Error() + " (" + pe.Pool + ": " + pe.Detail + ")"
	}
	return err.Error()
}

// Nodes whose pools are invalid, or being updated, the same way fail with
// the same text, whatever their names: the scheduler sums up the nodes'
// reasons by text, and a text naming each node's pool would make the
// pod's status grow with the fleet. The invalid pool's names are kept for
// the log.
func TestPoolFailuresReadAlikeOnEveryNode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 8))}
	for _, tc := range []struct {
		name  string
		slice func(node string) *resourceapi.ResourceSlice
	}{
		{"duplicate device name", func(node string) *resourceapi.ResourceSlice {
			s := localSlice(node, node, plainDevice("gpu-0", nil), plainDevice("gpu-0", nil))
			return s
		}},
		{"being updated", func(node string) *resourceapi.ResourceSlice {
			s := localSlice(node, node, plainDevice("gpu-0", nil))
			s.Spec.Pool.ResourceSliceCount = 2
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var texts []string
			for _, node := range []string{"node-a", "node-b"} {
				inv := NewInventory([]*resourceapi.ResourceSlice{tc.slice(node)}, DefaultFeatures())
				_, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, nil)
				if !IsNodeLevel(err) {
					t.Fatalf("%s: %v, want a node-level failure", node, err)
				}
				if strings.Contains(err.Error(), node) {
					t.Errorf("%s: %q names the node's pool", node, err)
				}
				var invalid *InvalidPoolError
				if errors.As(err, &invalid) && (invalid.Pool != drvNVIDIA+"/"+node || !strings.Contains(invalid.Detail, node+"-slice")) {
					t.Errorf("%s: invalid pool %q, detail %q: want the pool and slice named", node, invalid.Pool, invalid.Detail)
				}
				texts = append(texts, err.Error())
			}
			if texts[0] != texts[1] {
				t.Errorf("the two nodes fail with %q and %q, want the same text", texts[0], texts[1])
			}
		})
	}
}

// Refresh hands on the views of nodes whose slices did not change, and
// builds again those of nodes whose slices did, every view when a slice
// without a node name changed, and a view that read other nodes' slices
// (a pool not all on the node). Allocations on the refreshed inventory
// are those of a new one.
func TestInventoryRefreshKeepsUnchangedViews(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a, b, partial := pairNode("node-a"), nvswitchNode("node-b"), pairNode("node-c")
	partial.Spec.Pool.ResourceSliceCount = 2 // the pool's other slice is on no node yet
	mig := migNode("node-d", 2)
	all := append([]*resourceapi.ResourceSlice{a, b, partial}, mig...)
	nodes := []string{"node-a", "node-b", "node-c", "node-d"}
	views := func(inv *Inventory) map[string]*nodeView {
		out := map[string]*nodeView{}
		for _, n := range nodes {
			v, err := inv.view(node(n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = v
		}
		return out
	}
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 2))}
	allocations := func(inv *Inventory) map[string]string {
		out := map[string]string{}
		for _, n := range nodes {
			res, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(ctx, node(n), nil)
			out[n] = fmt.Sprint(res, err)
		}
		return out
	}

	inv := NewInventory(all, DefaultFeatures())
	before := views(inv)
	if inv.Refresh(slices.Clone(all)) != inv {
		t.Error("Refresh with the same slices made a new inventory")
	}

	b2 := b.DeepCopy()
	b2.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "xid", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	changed := append([]*resourceapi.ResourceSlice{a, b2, partial}, mig...)
	next := inv.Refresh(changed)
	after := views(next)
	for n, kept := range map[string]bool{"node-a": true, "node-b": false, "node-c": false, "node-d": true} {
		if got := after[n] == before[n]; got != kept {
			t.Errorf("%s: view handed on %v, want %v", n, got, kept)
		}
	}
	if got, want := allocations(next), allocations(NewInventory(changed, DefaultFeatures())); !maps.Equal(got, want) {
		t.Errorf("allocations on the refreshed inventory %v, on a new one %v", got, want)
	}

	shared := localSlice("", "network", plainDevice("nic-0", nil))
	shared.Spec.NodeName, shared.Spec.AllNodes = nil, ptr.To(true)
	for n, v := range views(next.Refresh(append(changed, shared))) {
		if v == after[n] {
			t.Errorf("%s: view handed on after a slice for all nodes came", n)
		}
	}
}

// Views are kept by node name, and Filter asks for CPU nodes' too: an
// autoscaler that names every node anew must not leave the view of each
// node it ever made. A node without slices of its own keeps its view
// across Refreshes until 16 in a row pass without it being asked for.
func TestInventoryRefreshDropsViewsOfNodesGone(t *testing.T) {
	gpu := pairNode("gpu-0")
	inv := NewInventory([]*resourceapi.ResourceSlice{gpu}, DefaultFeatures())
	cpuNode := func(name string) *v1.Node {
		n := node(name)
		n.UID = types.UID(name)
		return n
	}
	live := cpuNode("cpu-live")
	const rounds, perRound, idle = 50, 10, 16
	for r := range rounds {
		for _, n := range []*v1.Node{node("gpu-0"), live} {
			if _, err := inv.view(n); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := inv.view(live)
		for i := range perRound { // seen once, then scaled down for good
			if _, err := inv.view(cpuNode(fmt.Sprintf("cpu-%d-%d", r, i))); err != nil {
				t.Fatal(err)
			}
		}
		gpu = gpu.DeepCopy()
		gpu.Spec.Pool.Generation++ // the GPU node's agent republishes
		inv = inv.Refresh([]*resourceapi.ResourceSlice{gpu})
		if after, _ := inv.view(live); after != before {
			t.Fatalf("round %d: the view of a CPU node in use was built again", r)
		}
	}
	inv.viewsMu.RLock()
	defer inv.viewsMu.RUnlock()
	// The live nodes' and those of the last rounds; all 50 rounds' before
	// the fix.
	if n, most := len(inv.views), 2+perRound*idle; n > most {
		t.Errorf("%d views kept after %d rounds of %d CPU nodes each, want at most %d", n, rounds, perRound, most)
	}
}

// A node that reaches network-attached devices only (a slice for all
// nodes) keeps its view across Refreshes it is not asked for between:
// other nodes' agents republish far more often than Filter visits it.
func TestInventoryRefreshKeepsIdleViewsAWhile(t *testing.T) {
	gpu := pairNode("gpu-0")
	fabric := localSlice("", "fabric", plainDevice("nic-0", nil))
	fabric.Spec.NodeName, fabric.Spec.AllNodes = nil, ptr.To(true)
	inv := NewInventory([]*resourceapi.ResourceSlice{gpu, fabric}, DefaultFeatures())
	before, err := inv.view(node("cpu-0"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		gpu = gpu.DeepCopy()
		gpu.Spec.Pool.Generation++
		inv = inv.Refresh([]*resourceapi.ResourceSlice{gpu, fabric})
	}
	if after, _ := inv.view(node("cpu-0")); after != before {
		t.Error("the view of a node that reaches network devices only was built again after three Refreshes")
	}
}
