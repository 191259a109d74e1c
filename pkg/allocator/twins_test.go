package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// allocateTwins allocates p with the default policy and a budget the
// generated problems never spend, skipping twins or not.
func allocateTwins(t *testing.T, p *problem, skip bool) (*Result, error) {
	t.Helper()
	pol := DefaultPolicy()
	pol.SearchBudget = 1 << 30
	e, err := New(Options{Features: p.features, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	e.noTwins = !skip
	return e.NewSession(NewInventory(p.slices, p.features), p.classes, p.state, p.claims).Allocate(context.Background(), p.node, nil)
}

// TestTwinsKeepTheChoice: skipping twins changes neither the outcome, nor
// the allocation chosen, nor its score, on the differential test's
// generated problems; and it does skip on many of them.
func TestTwinsKeepTheChoice(t *testing.T) {
	cases := 4000
	if testing.Short() {
		cases = 800
	}
	fewer, solved := 0, 0
	for seed := range uint64(cases) {
		p := newProblem(seed)
		if slices.Contains(p.variations, varOver32Devices) {
			// Unbounded search over 33-40 alike devices, visiting twins:
			// every way of choosing a dozen of them.
			continue
		}
		if seed%2 == 1 {
			p = withTwins(p)
			if err := checkAgainstUpstream(p); err != nil {
				t.Fatalf("seed %d with twins: %v", seed, err)
			}
		}
		all, errAll := allocateTwins(t, p, false)
		some, errSome := allocateTwins(t, p, true)
		if !sameError(errAll, errSome) {
			t.Fatalf("seed %d: visiting twins says %v, skipping them says %v", seed, errAll, errSome)
		}
		if errAll != nil {
			continue
		}
		solved++
		if diff := cmp.Diff(withoutShareIDs(all.Allocations), withoutShareIDs(some.Allocations), quantityCmp); diff != "" {
			t.Fatalf("seed %d: skipping twins chose another allocation (-visiting +skipping):\n%s", seed, diff)
		}
		if all.Quality.Score != some.Quality.Score {
			t.Fatalf("seed %d: score %v visiting twins, %v skipping them", seed, all.Quality.Score, some.Quality.Score)
		}
		if some.Quality.Explored > all.Quality.Explored {
			t.Fatalf("seed %d: skipping twins explored %d solutions, visiting them %d", seed, some.Quality.Explored, all.Quality.Explored)
		}
		if some.Quality.Explored < all.Quality.Explored {
			fewer++
		}
	}
	t.Logf("%d of %d problems solved; %d explored fewer solutions by skipping twins", solved, cases, fewer)
	if fewer < solved/10 {
		t.Errorf("only %d of %d solved problems had twins to skip: the generator does not exercise them", fewer, solved)
	}
}

// sameError: both nil, or the same error. An input error may name
// another device from run to run: which device of a pool's slices comes
// first follows map order, in upstream's allocator as in the engine (an
// All request whose constraint fails names the first device it meets).
func sameError(a, b error) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case errors.Is(a, ErrInvalidInput):
		return errors.Is(b, ErrInvalidInput)
	}
	return a.Error() == b.Error()
}

// withTwins makes every device of a slice a copy of the slice's first
// device but for its name and a serial number of its own, so that the
// generated problem has twins.
func withTwins(p *problem) *problem {
	serial := int64(0)
	for _, s := range p.slices {
		devs := s.Spec.Devices
		for i := range devs {
			name := devs[i].Name
			if i > 0 {
				devs[i] = *devs[0].DeepCopy()
				devs[i].Name = name
			}
			if devs[i].Attributes == nil {
				devs[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
			}
			serial++
			devs[i].Attributes["serial"] = num(serial)
		}
	}
	return p
}

// identicalGPUs is a node of n GPUs that differ only by identity
// attributes: uuid, index and a PCIe root of their own.
func identicalGPUs(nodeName string, n int) *resourceapi.ResourceSlice {
	s := gpuSlice(nodeName, nil)
	for i := range n {
		d := gpuDevice(nodeName, i, gpu{numa: 0, pcie: fmt.Sprintf("pci0000:%02x", i), product: "NVIDIA H100 80GB HBM3"})
		d.Attributes["index"] = num(int64(i))
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func TestTwinClasses(t *testing.T) {
	tainted := identicalGPUs("n", 4)
	tainted.Spec.Devices[3].Taints = []resourceapi.DeviceTaint{{Key: "maint", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	otherMemory := identicalGPUs("n", 4)
	otherMemory.Spec.Devices[2].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("40Gi")}
	sharedValue := identicalGPUs("n", 4)
	for _, i := range []int{0, 1} {
		sharedValue.Spec.Devices[i].Attributes["rack"] = str("r1")
	}
	shared := identicalGPUs("n", 3)
	shared.Spec.Devices[1].AllowMultipleAllocations = ptr.To(true)
	for _, tc := range []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		want   []int32
	}{
		{"identical GPUs are one class", []*resourceapi.ResourceSlice{identicalGPUs("n", 8)}, []int32{0, 0, 0, 0, 0, 0, 0, 0}},
		{"NVLink pairs, interleaved: twins within a pair", []*resourceapi.ResourceSlice{pairNode("n")}, []int32{0, 1, 2, 3, 0, 1, 2, 3}},
		{"NVSwitch with a PCIe root per two GPUs", []*resourceapi.ResourceSlice{nvswitchNode("n")}, []int32{0, 0, 1, 1, 2, 2, 3, 3}},
		{"a taint sets a device apart", []*resourceapi.ResourceSlice{tainted}, []int32{0, 0, 0, 1}},
		{"capacity sets a device apart", []*resourceapi.ResourceSlice{otherMemory}, []int32{0, 0, 1, 0}},
		{"a value two devices share is no identity", []*resourceapi.ResourceSlice{sharedValue}, []int32{0, 0, 1, 1}},
		{"shared devices have no twins", []*resourceapi.ResourceSlice{shared}, []int32{0, -1, 0}},
		{"partitions and devices with counters have no twins", migNode("n", 1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewInventory(tc.slices, DefaultFeatures()).view(node("n"))
			if err != nil {
				t.Fatal(err)
			}
			got := v.twinClasses()
			if tc.want == nil {
				tc.want = make([]int32, len(got))
				for i := range tc.want {
					tc.want[i] = -1
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("twin classes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTwinsExploreOnce: four of eight identical GPUs are one solution,
// not 70, and the devices are upstream's first fit, also where selectors
// read the identity attributes.
func TestTwinsExploreOnce(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{identicalGPUs("n", 8)}
	index := `device.attributes["` + drvNVIDIA + `"].index`
	for _, tc := range []struct {
		name     string
		reqs     []resourceapi.DeviceRequest
		skip     bool
		explored int
		devices  []string
	}{
		{"skipping twins", []resourceapi.DeviceRequest{exact("r", gpuClass.Name, 4)}, true, 1, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{"visiting twins", []resourceapi.DeviceRequest{exact("r", gpuClass.Name, 4)}, false, 70, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{"a selector on the uuid", []resourceapi.DeviceRequest{exact("r", gpuClass.Name, 4, `device.attributes["`+drvNVIDIA+`"].uuid != "GPU-n-0"`)},
			true, 1, []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"}},
		{"another request selects one by index", []resourceapi.DeviceRequest{exact("one", gpuClass.Name, 1, index+" == 5"), exact("rest", gpuClass.Name, 3)},
			true, 1, []string{"gpu-5", "gpu-0", "gpu-1", "gpu-2"}},
		{"another request selects one by index, visiting twins", []resourceapi.DeviceRequest{exact("one", gpuClass.Name, 1, index+" == 5"), exact("rest", gpuClass.Name, 3)},
			false, 35, []string{"gpu-5", "gpu-0", "gpu-1", "gpu-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := DefaultPolicy()
			e, err := New(Options{Features: DefaultFeatures(), Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			e.noTwins = !tc.skip
			claim := claimOf("c", tc.reqs...)
			res, err := e.NewSession(NewInventory(sl, DefaultFeatures()), testClasses, emptyState(), []*resourceapi.ResourceClaim{claim}).Allocate(context.Background(), node("n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Quality.Explored != tc.explored {
				t.Errorf("explored %d solutions, want %d", res.Quality.Explored, tc.explored)
			}
			if diff := cmp.Diff(tc.devices, deviceNames(res.Allocations)); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}
