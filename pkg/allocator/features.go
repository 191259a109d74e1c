package allocator

import "k8s.io/dynamic-resource-allocation/structured"

// Features are the DRA feature gates that change allocation. They use the
// upstream type so that a scheduler can pass the same value to both
// allocators.
type Features = structured.Features

// DefaultFeatures enables everything the engine implements: admin access,
// prioritized lists, partitionable devices, device taints, binding
// conditions, consumable capacity with fractional ranges. Prefer it over a
// zero Features{}, which silently turns all of those off.
func DefaultFeatures() Features {
	return Features{
		AdminAccess:             true,
		PrioritizedList:         true,
		PartitionableDevices:    true,
		DeviceTaints:            true,
		DeviceBindingAndStatus:  true,
		ConsumableCapacity:      true,
		FractionalCapacityRange: true,
	}
}

// supported is the set the engine implements; others are refused so that
// an allocation never silently ignores a feature.
var supported = DefaultFeatures()

// Unsupported lists, by feature gate name and sorted, the features enabled in f
// that the engine does not implement; New refuses such an f.
func Unsupported(f Features) []string {
	return sortedList(f.Set().Difference(supported.Set()))
}

// legacyFeatures is upstream's "stable" allocator's feature set. A feature
// set within it makes upstream use that older implementation, which
// ignores capacity requests and shares and does not know
// distinctAttribute; the engine then does the same.
var legacyFeatures = Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}

func isLegacy(f Features) bool { return legacyFeatures.Set().IsSuperset(f.Set()) }
