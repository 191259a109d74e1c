package allocator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Minimal cases of the seven edge kinds of issue 17 (see
// gen_edges_test.go for the generated ones). Every case asserts
// upstream's outcome, so that a change upstream shows here, and the
// engine's under first-fit and the default policy; every allocation the
// engine returns must pass validate.

const edgeDriver = "gpu.example.com"

func edgeNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{"zone": "a"}}}
}

// edgeSlice is a slice of pool on node ("" for none) with devices.
func edgeSlice(name, pool, node string, count int64, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: edgeDriver, Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: count},
			Devices: devices,
		},
	}
	if node != "" {
		s.Spec.NodeName = ptr.To(node)
	}
	return s
}

// edgeCounters is the counter slice of pool: set "gpu" with counters
// name=value, name=value, ...
func edgeCounters(name, pool, node string, count int64, counters ...string) *resourceapi.ResourceSlice {
	s := edgeSlice(name, pool, node, count)
	set := resourceapi.CounterSet{Name: "gpu", Counters: map[string]resourceapi.Counter{}}
	for i := 0; i < len(counters); i += 2 {
		set.Counters[counters[i]] = resourceapi.Counter{Value: resource.MustParse(counters[i+1])}
	}
	s.Spec.SharedCounters = []resourceapi.CounterSet{set}
	return s
}

// consumer is a device that consumes name=value, ... of set "gpu".
func consumer(name string, counters ...string) resourceapi.Device {
	d := resourceapi.Device{Name: name}
	cc := resourceapi.DeviceCounterConsumption{CounterSet: "gpu", Counters: map[string]resourceapi.Counter{}}
	for i := 0; i < len(counters); i += 2 {
		cc.Counters[counters[i]] = resourceapi.Counter{Value: resource.MustParse(counters[i+1])}
	}
	d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{cc}
	return d
}

// withMem gives a device the attribute mem, which the "strict" class
// needs (it errors at run time on devices without it).
func withMem(d resourceapi.Device) resourceapi.Device {
	d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"mem": num(80)}
	return d
}

// shareable is an allow-multiple device with 40Gi of memory.
func shareable(d resourceapi.Device) resourceapi.Device {
	d.AllowMultipleAllocations = ptr.To(true)
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}}
	return d
}

var edgeClasses = classList{
	class("any"),
	class("strict", `device.attributes[device.driver].mem >= 40`),
	class("shared", `device.allowMultipleAllocations`),
}

// shareOf asks for 10Gi of a shared device.
func shareOf(name string) resourceapi.DeviceRequest {
	r := exact(name, "shared", 1)
	r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}}
	return r
}

// edgeProblem is a problem on node-0 with one claim of reqs.
func edgeProblem(f Features, slices []*resourceapi.ResourceSlice, reqs ...resourceapi.DeviceRequest) *problem {
	return &problem{features: f, node: edgeNode(), slices: slices, classes: edgeClasses, state: emptyState(),
		claims: []*resourceapi.ResourceClaim{claimOf("c", reqs...)}}
}

// withShare records a share of 20Gi of device in the ledger.
func withShare(p *problem, pool, device string) *problem {
	id := structured.MakeDeviceID(edgeDriver, pool, device)
	p.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, ptr.To[types.UID]("earlier")))
	p.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")}))
	return p
}

func withFeatures(f Features, change func(*Features)) Features {
	change(&f)
	return f
}

// stableFeatures is a feature set upstream routes to its stable allocator.
var stableFeatures = Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}

type edgeCase struct {
	name     string
	kind     edgeKind
	p        *problem
	upstream outcome
	// ours is the engine's outcome when it differs from upstream's
	// (documented refusals only); "" means upstream's.
	ours    outcome
	errHas  []string // in the engine's error
	devices []string // the devices the engine must return, if set
	// upstreamRandom: upstream's stable allocator visits pools in map
	// order; upstream only has to give the outcome in some run.
	upstreamRandom bool
}

func TestEdgeParity(t *testing.T) {
	var cases []edgeCase
	for _, c := range [][]edgeCase{compatibilityCases(), counterCases(), stableCases(), selectorCases()} {
		cases = append(cases, c...)
	}
	for _, tc := range cases {
		t.Run(tc.kind.String()+"/"+tc.name, func(t *testing.T) {
			up, upOut, upErr := upstreamAllocate(tc.p)
			if tc.upstreamRandom && upOut != tc.upstream && upstreamMaySay(tc.p, tc.upstream) {
				upOut, up = tc.upstream, nil
			}
			if upOut != tc.upstream {
				t.Fatalf("upstream says %s (%v), the test expects %s: upstream changed?", upOut, upErr, tc.upstream)
			}
			if up != nil {
				if err := validate(tc.p, up); err != nil {
					t.Fatalf("validator rejects upstream's result: %v", err)
				}
			}
			want := tc.upstream
			if tc.ours != "" {
				want = tc.ours
			}
			for _, pol := range []struct {
				name string
				p    Policy
			}{{"first-fit", firstFitPolicy()}, {"default", DefaultPolicy()}} {
				res, out, err := ourAllocate(tc.p, pol.p, nil)
				if out != want {
					t.Fatalf("%s: gputopo says %s (%v), want %s (upstream: %v)", pol.name, out, err, want, upErr)
				}
				for _, s := range tc.errHas {
					if err == nil || !strings.Contains(errorText(err), s) {
						t.Errorf("%s: error %v does not say %q", pol.name, errorText(err), s)
					}
				}
				if out != outcomeOK {
					continue
				}
				if err := validate(tc.p, res.Allocations); err != nil {
					t.Fatalf("%s: invalid allocation: %v", pol.name, err)
				}
				if tc.devices != nil {
					if diff := cmp.Diff(tc.devices, deviceNames(res.Allocations)); diff != "" {
						t.Errorf("%s: devices (-want +got):\n%s", pol.name, diff)
					}
				}
			}
		})
	}
}

// Two inputs a review found, valid per the API, where the engine
// disagreed with upstream: a firstAvailable alternative asking for more
// devices than an int32 holds (upstream skips it for the next one), and an
// attribute written short on some devices of a driver and fully qualified
// on others (a matchAttribute constraint reads both; the twin skipping
// took the short one for an identity and skipped the device it needed).
func TestParityOnHugeCountsAndMixedAttributeKeys(t *testing.T) {
	one := attributed("d0", nil)
	huge := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "any", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1 << 31},
		{Name: "one", DeviceClassName: "any", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}
	short := func(name, model string) resourceapi.Device {
		return attributed(name, map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": str(model)})
	}
	full := attributed("d3", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{edgeDriver + "/model": str("b")})
	sameModel := exact("r", "any", 2)
	claim := claimOf("c", sameModel)
	claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(edgeDriver + "/model"))}}
	mixed := edgeProblem(DefaultFeatures(), []*resourceapi.ResourceSlice{edgeSlice("p", "p", "node-0", 1, short("d1", "a"), short("d2", "b"), full)})
	mixed.claims = []*resourceapi.ResourceClaim{claim}
	for name, p := range map[string]*problem{
		"huge count in a subrequest": edgeProblem(DefaultFeatures(), []*resourceapi.ResourceSlice{edgeSlice("p", "p", "node-0", 1, one)}, huge),
		"mixed attribute keys":       mixed,
	} {
		if err := checkAgainstUpstream(p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, out, err := ourAllocate(p, DefaultPolicy(), nil); out != outcomeOK {
			t.Errorf("%s: %s (%v), want allocated as upstream does", name, out, err)
		}
	}
}

func attributed(name string, attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: attrs}
}
