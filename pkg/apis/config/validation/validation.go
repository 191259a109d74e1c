// Package validation checks gputopo's plugin arguments.
package validation

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/topology"
)

// ValidateGPUTopologyArgs returns every invalid field, with its path.
func ValidateGPUTopologyArgs(path *field.Path, a *config.GPUTopologyArgs) error {
	var errs field.ErrorList
	for _, p := range []struct {
		name string
		part allocator.PolicyPart
	}{{"topology", a.Topology}, {"mig", a.MIG}, {"packing", a.Packing}} {
		if !allocator.InPolicyRange(p.part.Weight) {
			errs = append(errs, field.Invalid(path.Child(p.name, "weight"), p.part.Weight, policyRange))
		}
	}
	if a.Packing.Enabled && len(a.Workload) == 0 {
		errs = append(errs, field.Required(path.Child("workload"), "needed when packing is enabled"))
	}
	var total float64
	seen := map[topology.TaskClass]bool{}
	for i, c := range a.Workload {
		p := path.Child("workload").Index(i)
		total += c.Weight
		// The same request twice: one class with the summed weight.
		key := c
		key.Weight = 0
		if seen[key] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("gpus %d, share %g, cpuMilli %d, memoryMiB %d", c.GPUs, c.Share, c.CPUMilli, c.MemoryMiB)))
		}
		seen[key] = true
		switch {
		case c.GPUs < 1:
			errs = append(errs, field.Invalid(p.Child("gpus"), c.GPUs, "must be at least 1"))
		case c.Share <= 0 || c.Share > 1:
			errs = append(errs, field.Invalid(p.Child("share"), c.Share, "must be in (0, 1]"))
		case c.GPUs > 1 && c.Share != 1:
			errs = append(errs, field.Invalid(p.Child("share"), c.Share, "classes of several GPUs take whole GPUs (share 1)"))
		}
		if !finite(c.Weight) || c.Weight > maxClassWeight {
			errs = append(errs, field.Invalid(p.Child("weight"), c.Weight, fmt.Sprintf("must be a number in [0, %g]", maxClassWeight)))
		}
		if c.CPUMilli < 0 {
			errs = append(errs, field.Invalid(p.Child("cpuMilli"), c.CPUMilli, "must not be negative"))
		}
		if c.MemoryMiB < 0 {
			errs = append(errs, field.Invalid(p.Child("memoryMiB"), c.MemoryMiB, "must not be negative"))
		}
	}
	if len(a.Workload) > 0 && total <= 0 {
		errs = append(errs, field.Invalid(path.Child("workload"), total, "the weights must not all be 0: fragmentation is measured against them"))
	}
	if !allocator.InPolicyRange(a.HostPressure) {
		errs = append(errs, field.Invalid(path.Child("hostPressure"), a.HostPressure, policyRange))
	}
	if !allocator.InPolicyRange(a.LinkClassCost) {
		errs = append(errs, field.Invalid(path.Child("linkClassCost"), a.LinkClassCost, policyRange))
	}
	if a.SearchBudget < 0 {
		errs = append(errs, field.Invalid(path.Child("searchBudget"), a.SearchBudget, "must not be negative"))
	}
	if a.FilterTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("filterTimeout"), a.FilterTimeout.Duration.String(), "must not be negative"))
	}
	// As the in-tree DynamicResourcesArgs: a shorter wait than the
	// device's own status round trip would fail every binding.
	if a.BindingTimeout.Duration < time.Second {
		errs = append(errs, field.Invalid(path.Child("bindingTimeout"), a.BindingTimeout.Duration.String(), "must be at least 1 second"))
	}
	errs = append(errs, validateNames(path.Child("drivers"), a.Drivers, "a driver name")...)
	return errs.ToAggregate()
}

// validateNames checks a list of object names (DNS subdomains, as
// DeviceClass and driver names are): each given, valid, and listed once.
func validateNames(path *field.Path, names []string, what string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, n := range names {
		switch bad := validation.IsDNS1123Subdomain(n); {
		case n == "":
			errs = append(errs, field.Required(path.Index(i), what))
		case len(bad) > 0:
			errs = append(errs, field.Invalid(path.Index(i), n, what+": "+bad[0]))
		case seen[n]:
			errs = append(errs, field.Duplicate(path.Index(i), n))
		}
		seen[n] = true
	}
	return errs
}

var policyRange = fmt.Sprintf("must be a number in [0, %g]", allocator.MaxPolicyValue)

// maxClassWeight bounds a workload class's weight: weights are relative,
// and sums of larger ones overflow to +Inf, which zeroes every
// fragmentation measure.
const maxClassWeight = 1e9

func finite(w float64) bool { return w >= 0 && !math.IsNaN(w) && !math.IsInf(w, 0) }

// MaxCliquePlacements bounds maxPlacements: every placement is a full
// trial of the group's pods in one scheduling cycle.
const MaxCliquePlacements = 64

// ValidateGPUCliquePlacementArgs returns every invalid field, with its path.
func ValidateGPUCliquePlacementArgs(path *field.Path, a *config.GPUCliquePlacementArgs) error {
	var errs field.ErrorList
	if a.MaxPlacements < 1 || a.MaxPlacements > MaxCliquePlacements {
		errs = append(errs, field.Invalid(path.Child("maxPlacements"), a.MaxPlacements, fmt.Sprintf("must be in [1, %d]", MaxCliquePlacements)))
	}
	errs = append(errs, validateNames(path.Child("gpuClasses"), a.GPUClasses, "a DeviceClass name")...)
	return errs.ToAggregate()
}
