package validation

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gputopo/gputopo/pkg/apis/config"
	v1 "github.com/gputopo/gputopo/pkg/apis/config/v1"
	"github.com/gputopo/gputopo/pkg/topology"
)

func TestValidateGPUTopologyArgs(t *testing.T) {
	valid, err := v1.Decode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateGPUTopologyArgs(field.NewPath("args"), valid); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(a *config.GPUTopologyArgs)
		want   []string
	}{
		{"negative weight", func(a *config.GPUTopologyArgs) { a.MIG.Weight = -1 }, []string{"args.mig.weight"}},
		{"bad workload", func(a *config.GPUTopologyArgs) {
			a.Workload = topology.Workload{{GPUs: 0, Share: 1}, {GPUs: 1, Share: 2}, {GPUs: 2, Share: 0.5}, {GPUs: 1, Share: 1, Weight: -1}, {GPUs: 1, Share: 1, CPUMilli: -1, MemoryMiB: -1}}
		}, []string{"args.workload[0].gpus", "args.workload[1].share", "args.workload[2].share", "args.workload[3].weight", "args.workload[4].cpuMilli", "args.workload[4].memoryMiB"}},
		// Weights whose sum overflows, or that are all 0, zero every
		// fragmentation measure; the same class twice is one class.
		{"huge weights", func(a *config.GPUTopologyArgs) {
			a.Workload = topology.Workload{{GPUs: 1, Share: 1, Weight: 1e308}, {GPUs: 1, Share: 0.5, Weight: 1e308}}
			a.Packing.Weight = math.Inf(1)
		}, []string{"args.workload[0].weight", "args.workload[1].weight", "args.packing.weight"}},
		{"zero weights", func(a *config.GPUTopologyArgs) {
			a.Workload = topology.Workload{{GPUs: 1, Share: 1}, {GPUs: 2, Share: 1}}
		}, []string{"args.workload: Invalid value: 0: the weights must not all be 0"}},
		{"a class twice", func(a *config.GPUTopologyArgs) {
			a.Workload = topology.Workload{{GPUs: 1, Share: 1, Weight: 1}, {GPUs: 2, Share: 1, Weight: 1}, {GPUs: 1, Share: 1, Weight: 3}}
		}, []string{"args.workload[2]: Duplicate value"}},
		{"negative host pressure", func(a *config.GPUTopologyArgs) { a.HostPressure = -0.1 }, []string{"args.hostPressure"}},
		{"NaN host pressure", func(a *config.GPUTopologyArgs) { a.HostPressure = math.NaN() }, []string{"args.hostPressure"}},
		{"negative link class cost", func(a *config.GPUTopologyArgs) { a.LinkClassCost = -1 }, []string{"args.linkClassCost"}},
		{"infinite link class cost", func(a *config.GPUTopologyArgs) { a.LinkClassCost = math.Inf(1) }, []string{"args.linkClassCost"}},
		// Finite but so large that scores overflow (a node rated as the
		// sentinel of an unmeasured one, NaN comparisons).
		{"huge policy values", func(a *config.GPUTopologyArgs) {
			a.LinkClassCost, a.HostPressure, a.Topology.Weight = 1e300, 2e6, 1e308
		}, []string{"args.linkClassCost: Invalid value: 1e+300: must be a number in [0, 1e+06]", "args.hostPressure", "args.topology.weight"}},
		{"packing without workload", func(a *config.GPUTopologyArgs) { a.Workload = nil }, []string{"args.workload: Required"}},
		{"negative budget and timeouts", func(a *config.GPUTopologyArgs) {
			a.SearchBudget = -1
			a.FilterTimeout = metav1.Duration{Duration: -1}
			a.BindingTimeout = metav1.Duration{}
		}, []string{"args.searchBudget", `args.filterTimeout: Invalid value: "-1ns"`, `args.bindingTimeout: Invalid value: "0s"`}},
		{"binding timeout under a second", func(a *config.GPUTopologyArgs) {
			a.BindingTimeout = metav1.Duration{Duration: 999 * time.Millisecond}
		}, []string{`args.bindingTimeout: Invalid value: "999ms": must be at least 1 second`}},
		{"bad drivers", func(a *config.GPUTopologyArgs) {
			a.Drivers = []string{"gpu.nvidia.com", "", "GPU_driver", "gpu.nvidia.com"}
		}, []string{"args.drivers[1]: Required value: a driver name", `args.drivers[2]: Invalid value: "GPU_driver": a driver name`, `args.drivers[3]: Duplicate value: "gpu.nvidia.com"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := *valid
			a.Workload = append(topology.Workload(nil), valid.Workload...)
			tc.mutate(&a)
			err := ValidateGPUTopologyArgs(field.NewPath("args"), &a)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestValidateGPUCliquePlacementArgs(t *testing.T) {
	valid, err := v1.DecodeCliquePlacement(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateGPUCliquePlacementArgs(field.NewPath("args"), valid); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(a *config.GPUCliquePlacementArgs)
		want   []string
	}{
		{"no placements", func(a *config.GPUCliquePlacementArgs) { a.MaxPlacements = 0 }, []string{"args.maxPlacements"}},
		{"too many placements", func(a *config.GPUCliquePlacementArgs) { a.MaxPlacements = MaxCliquePlacements + 1 }, []string{"args.maxPlacements"}},
		{"bad classes", func(a *config.GPUCliquePlacementArgs) { a.GPUClasses = []string{"a", "", "a", "Not A Class!"} }, []string{"args.gpuClasses[1]: Required", "args.gpuClasses[2]: Duplicate", `args.gpuClasses[3]: Invalid value: "Not A Class!"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := *valid
			a.GPUClasses = append([]string(nil), valid.GPUClasses...)
			tc.mutate(&a)
			err := ValidateGPUCliquePlacementArgs(field.NewPath("args"), &a)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
