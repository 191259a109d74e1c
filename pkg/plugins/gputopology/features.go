package gputopology

import (
	"fmt"
	"slices"
	"strings"

	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/gputopo/gputopo/pkg/allocator"
)

// allocatorFeatures maps the scheduler's feature gates onto the engine's
// features, as the in-tree DynamicResources plugin maps them onto
// upstream's allocator: a gate switched off on the scheduler's command
// line switches the feature off here too.
func allocatorFeatures(fts plfeature.Features) allocator.Features {
	return allocator.Features{
		AdminAccess:             fts.EnableDRAAdminAccess,
		PrioritizedList:         fts.EnableDRAPrioritizedList,
		PartitionableDevices:    fts.EnableDRAPartitionableDevices,
		DeviceTaints:            fts.EnableDRADeviceTaints,
		DeviceBindingAndStatus:  fts.EnableDRADeviceBindingConditions && fts.EnableDRAResourceClaimDeviceStatus,
		ConsumableCapacity:      fts.EnableDRAConsumableCapacity,
		FractionalCapacityRange: fts.EnableDRAFractionalCapacityRange,
		ListTypeAttributes:      fts.EnableDRAListTypeAttributes,
		OptionalNodeOperations:  fts.EnableDRAOptionalNodeOperations,
		DerivedAttributes:       fts.EnableDRADerivedAttributes,
		CompatibilityGroups:     fts.EnableDRADeviceCompatibilityGroups,
	}
}

// unsupportedGates is the error for enabled gates whose features the
// engine (allocator.Unsupported names features by their gates) or the
// plugin does not implement: the scheduler stops at start instead of
// allocating without them. The plugin lacks DRANodeAllocatableResources
// (devices that take node CPU and memory, alpha): pods would be placed
// without that accounting.
func unsupportedGates(fts plfeature.Features) error {
	gates := allocator.Unsupported(allocatorFeatures(fts))
	if fts.EnableDRANodeAllocatableResources {
		gates = append(gates, "DRANodeAllocatableResources")
		slices.Sort(gates)
	}
	if len(gates) == 0 {
		return nil
	}
	return fmt.Errorf("feature gates %s are enabled, and GPUTopology does not implement them yet: switch them off for this scheduler (--feature-gates=%s=false) or schedule these pods with the in-tree DynamicResources plugin",
		strings.Join(gates, ", "), strings.Join(gates, "=false,"))
}
