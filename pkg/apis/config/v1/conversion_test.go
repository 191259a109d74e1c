package v1

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

func TestDecode(t *testing.T) {
	defaults, err := Decode(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      runtime.Object
		want    func() *config.GPUTopologyArgs
		wantErr string
	}{
		{name: "nil gives defaults", in: nil, want: func() *config.GPUTopologyArgs {
			return &config.GPUTopologyArgs{
				Topology: allocator.PolicyPart{Enabled: true, Weight: 1}, MIG: allocator.PolicyPart{Enabled: true, Weight: 1}, Packing: allocator.PolicyPart{Enabled: true, Weight: 1},
				Workload: defaults.Workload, HostPressure: allocator.DefaultHostPressure, LinkClassCost: allocator.DefaultLinkClassCost, SearchBudget: int32(allocator.DefaultPolicy().SearchBudget),
				FilterTimeout: metav1.Duration{Duration: DefaultFilterTimeout}, BindingTimeout: metav1.Duration{Duration: DefaultBindingTimeout},
			}
		}},
		{name: "yaml with some fields", in: &runtime.Unknown{Raw: []byte("apiVersion: gputopo.io/v1\nkind: GPUTopologyArgs\nmig: {enabled: false}\ntopology: {weight: 2.5}\nsearchBudget: 0\nfilterTimeout: 1s\nhostPressure: 0\nlinkClassCost: 0.5\n")}, want: func() *config.GPUTopologyArgs {
			a := *defaults
			a.HostPressure = 0
			a.LinkClassCost = 0.5
			a.MIG = allocator.PolicyPart{Enabled: false, Weight: 1}
			a.Topology = allocator.PolicyPart{Enabled: true, Weight: 2.5}
			a.SearchBudget = 0
			a.FilterTimeout = metav1.Duration{Duration: time.Second}
			return &a
		}},
		{name: "drivers", in: &runtime.Unknown{Raw: []byte("drivers: [gpu.nvidia.com]\n")}, want: func() *config.GPUTopologyArgs {
			a := *defaults
			a.Drivers = []string{"gpu.nvidia.com"}
			return &a
		}},
		{name: "json", in: &runtime.Unknown{Raw: []byte(`{"packing":{"weight":3},"workload":[{"gpus":1,"share":0.5,"weight":1,"cpuMilli":4000,"memoryMiB":8192}]}`)}, want: func() *config.GPUTopologyArgs {
			a := *defaults
			a.Packing = allocator.PolicyPart{Enabled: true, Weight: 3}
			a.Workload = topology.Workload{{GPUs: 1, Share: 0.5, Weight: 1, CPUMilli: 4000, MemoryMiB: 8192}}
			return &a
		}},
		{name: "typo is an error naming the field", in: &runtime.Unknown{Raw: []byte("topolgy: {weight: 2}\n")}, wantErr: `unknown field "topolgy"`},
		{name: "wrong kind", in: &runtime.Unknown{Raw: []byte("kind: Other\n")}, wantErr: "kind: unsupported value"},
		{name: "bad duration names the field", in: &runtime.Unknown{Raw: []byte("filterTimeout: 10 seconds\n")}, wantErr: `GPUTopologyArgs: filterTimeout: Invalid value: "10 seconds": time: unknown unit`},
		{name: "nested typo names its object", in: &runtime.Unknown{Raw: []byte("packing: {wieght: 2}\n")}, wantErr: `GPUTopologyArgs: packing: unknown field "wieght"`},
		// kube-scheduler matches keys case-sensitively: a key repeated in
		// another case must not drop one value silently.
		{name: "a key in another case is unknown", in: &runtime.Unknown{Raw: []byte("searchBudget: 20000\nSearchBudget: 5\n")}, wantErr: `GPUTopologyArgs: unknown field "SearchBudget"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want(), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Typed args passed in Go (not YAML) are copied before defaulting: a
// field left unset must get its default, not the zero value the copy
// would otherwise write (topology switched off by {weight: 2}).
func TestDecodeTypedArgs(t *testing.T) {
	defaults, err := Decode(nil)
	if err != nil {
		t.Fatal(err)
	}
	in := &GPUTopologyArgs{
		Topology: &PolicyPart{Weight: ptr.To(2.0)},
		MIG:      &PolicyPart{Enabled: ptr.To(false)},
	}
	got, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	want := *defaults
	want.Topology = allocator.PolicyPart{Enabled: true, Weight: 2}
	want.MIG = allocator.PolicyPart{Enabled: false, Weight: 1}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if in.Topology.Enabled != nil || in.Packing != nil {
		t.Errorf("Decode changed its input: %+v", in)
	}
}

func TestDeepCopyKeepsUnsetFields(t *testing.T) {
	in := &GPUTopologyArgs{Topology: &PolicyPart{Weight: ptr.To(2.0)}, SearchBudget: ptr.To[int32](5)}
	out := in.DeepCopy()
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("(-in +copy):\n%s", diff)
	}
	*out.Topology.Weight, *out.SearchBudget = 3, 6
	if *in.Topology.Weight != 2 || *in.SearchBudget != 5 {
		t.Errorf("the copy shares memory with the original: %+v", in)
	}
}

func TestDecodeCliquePlacement(t *testing.T) {
	tests := []struct {
		name    string
		in      runtime.Object
		want    *config.GPUCliquePlacementArgs
		wantErr string
	}{
		{name: "nil gives defaults", want: &config.GPUCliquePlacementArgs{MaxPlacements: DefaultMaxPlacements, GPUClasses: []string{contract.ClassGPU}}},
		{name: "yaml", in: &runtime.Unknown{Raw: []byte("apiVersion: gputopo.io/v1\nkind: GPUCliquePlacementArgs\nmaxPlacements: 2\ngpuClasses: [gb200.example.com]\n")},
			want: &config.GPUCliquePlacementArgs{MaxPlacements: 2, GPUClasses: []string{"gb200.example.com"}}},
		{name: "typed", in: &GPUCliquePlacementArgs{MaxPlacements: ptr.To[int32](8)}, want: &config.GPUCliquePlacementArgs{MaxPlacements: 8, GPUClasses: []string{contract.ClassGPU}}},
		{name: "typo is an error naming the field", in: &runtime.Unknown{Raw: []byte("maxPlacement: 2\n")}, wantErr: `GPUCliquePlacementArgs: unknown field "maxPlacement" (known fields: apiVersion, gpuClasses, kind, maxPlacements)`},
		{name: "wrong kind", in: &runtime.Unknown{Raw: []byte("kind: GPUTopologyArgs\n")}, wantErr: `GPUCliquePlacementArgs: kind: unsupported value "GPUTopologyArgs"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeCliquePlacement(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
