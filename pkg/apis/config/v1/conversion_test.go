package v1

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gputopo/gputopo/pkg/apis/config"
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
				Topology: config.PolicyPart{Enabled: true, Weight: 1}, MIG: config.PolicyPart{Enabled: true, Weight: 1}, Packing: config.PolicyPart{Enabled: true, Weight: 1},
				Workload: defaults.Workload, SearchBudget: DefaultSearchBudget,
				FilterTimeout: metav1.Duration{Duration: DefaultFilterTimeout}, BindingTimeout: metav1.Duration{Duration: DefaultBindingTimeout},
			}
		}},
		{name: "yaml with some fields", in: &runtime.Unknown{Raw: []byte("apiVersion: gputopo.io/v1\nkind: GPUTopologyArgs\nmig: {enabled: false}\ntopology: {weight: 2.5}\nsearchBudget: 0\nfilterTimeout: 1s\n")}, want: func() *config.GPUTopologyArgs {
			a := *defaults
			a.MIG = config.PolicyPart{Enabled: false, Weight: 1}
			a.Topology = config.PolicyPart{Enabled: true, Weight: 2.5}
			a.SearchBudget = 0
			a.FilterTimeout = metav1.Duration{Duration: time.Second}
			return &a
		}},
		{name: "json", in: &runtime.Unknown{Raw: []byte(`{"packing":{"weight":3},"workload":[{"gpus":1,"share":0.5,"weight":1,"cpuMilli":4000,"memoryMiB":8192}]}`)}, want: func() *config.GPUTopologyArgs {
			a := *defaults
			a.Packing = config.PolicyPart{Enabled: true, Weight: 3}
			a.Workload = []config.TaskClass{{GPUs: 1, Share: 0.5, Weight: 1, CPUMilli: 4000, MemoryMiB: 8192}}
			return &a
		}},
		{name: "typo is an error naming the field", in: &runtime.Unknown{Raw: []byte("topolgy: {weight: 2}\n")}, wantErr: `unknown field "topolgy"`},
		{name: "wrong kind", in: &runtime.Unknown{Raw: []byte("kind: Other\n")}, wantErr: "kind: unsupported value"},
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
