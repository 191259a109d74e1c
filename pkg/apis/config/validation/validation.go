// Package validation checks gputopo's plugin arguments.
package validation

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/apis/config"
)

// ValidateGPUTopologyArgs returns every invalid field, with its path.
func ValidateGPUTopologyArgs(path *field.Path, a *config.GPUTopologyArgs) error {
	var errs field.ErrorList
	for _, p := range []struct {
		name string
		part allocator.PolicyPart
	}{{"topology", a.Topology}, {"mig", a.MIG}, {"packing", a.Packing}} {
		if p.part.Weight < 0 {
			errs = append(errs, field.Invalid(path.Child(p.name, "weight"), p.part.Weight, "must not be negative"))
		}
	}
	if a.Packing.Enabled && len(a.Workload) == 0 {
		errs = append(errs, field.Required(path.Child("workload"), "needed when packing is enabled"))
	}
	for i, c := range a.Workload {
		p := path.Child("workload").Index(i)
		switch {
		case c.GPUs < 1:
			errs = append(errs, field.Invalid(p.Child("gpus"), c.GPUs, "must be at least 1"))
		case c.Share <= 0 || c.Share > 1:
			errs = append(errs, field.Invalid(p.Child("share"), c.Share, "must be in (0, 1]"))
		case c.GPUs > 1 && c.Share != 1:
			errs = append(errs, field.Invalid(p.Child("share"), c.Share, "classes of several GPUs take whole GPUs (share 1)"))
		}
		if c.Weight < 0 {
			errs = append(errs, field.Invalid(p.Child("weight"), c.Weight, "must not be negative"))
		}
		if c.CPUMilli < 0 {
			errs = append(errs, field.Invalid(p.Child("cpuMilli"), c.CPUMilli, "must not be negative"))
		}
		if c.MemoryMiB < 0 {
			errs = append(errs, field.Invalid(p.Child("memoryMiB"), c.MemoryMiB, "must not be negative"))
		}
	}
	if a.HostPressure < 0 || math.IsNaN(a.HostPressure) || math.IsInf(a.HostPressure, 0) {
		errs = append(errs, field.Invalid(path.Child("hostPressure"), a.HostPressure, "must be a finite number, not negative"))
	}
	if a.LinkClassCost < 0 || math.IsNaN(a.LinkClassCost) || math.IsInf(a.LinkClassCost, 0) {
		errs = append(errs, field.Invalid(path.Child("linkClassCost"), a.LinkClassCost, "must be a finite number, not negative"))
	}
	if a.SearchBudget < 0 {
		errs = append(errs, field.Invalid(path.Child("searchBudget"), a.SearchBudget, "must not be negative"))
	}
	if a.FilterTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("filterTimeout"), a.FilterTimeout.String(), "must not be negative"))
	}
	if a.BindingTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("bindingTimeout"), a.BindingTimeout.String(), "must be positive"))
	}
	return errs.ToAggregate()
}

// MaxCliquePlacements bounds maxPlacements: every placement is a full
// trial of the group's pods in one scheduling cycle.
const MaxCliquePlacements = 64

// ValidateGPUCliquePlacementArgs returns every invalid field, with its path.
func ValidateGPUCliquePlacementArgs(path *field.Path, a *config.GPUCliquePlacementArgs) error {
	var errs field.ErrorList
	if a.MaxPlacements < 1 || a.MaxPlacements > MaxCliquePlacements {
		errs = append(errs, field.Invalid(path.Child("maxPlacements"), a.MaxPlacements, fmt.Sprintf("must be in [1, %d]", MaxCliquePlacements)))
	}
	seen := map[string]bool{}
	for i, c := range a.GPUClasses {
		switch {
		case c == "":
			errs = append(errs, field.Required(path.Child("gpuClasses").Index(i), "a DeviceClass name"))
		case seen[c]:
			errs = append(errs, field.Duplicate(path.Child("gpuClasses").Index(i), c))
		}
		seen[c] = true
	}
	return errs.ToAggregate()
}
