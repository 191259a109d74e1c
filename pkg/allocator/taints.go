package allocator

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// ApplyDeviceTaintRules returns the slices with the taints of the rules
// added to the devices they select (by driver, pool and device name; an
// unset field selects all). Slices without affected devices are returned
// as they are; affected ones are deep-copied, never modified.
func ApplyDeviceTaintRules(slices []*resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) []*resourceapi.ResourceSlice {
	if len(rules) == 0 {
		return slices
	}
	out := make([]*resourceapi.ResourceSlice, len(slices))
	for i, s := range slices {
		out[i] = s
		var cp *resourceapi.ResourceSlice
		for di := range s.Spec.Devices {
			for _, rule := range rules {
				if !ruleSelects(rule, s, s.Spec.Devices[di].Name) {
					continue
				}
				if cp == nil {
					cp = s.DeepCopy()
					out[i] = cp
				}
				cp.Spec.Devices[di].Taints = append(cp.Spec.Devices[di].Taints, rule.Spec.Taint)
			}
		}
	}
	return out
}

func ruleSelects(rule *resourceapi.DeviceTaintRule, s *resourceapi.ResourceSlice, device string) bool {
	sel := rule.Spec.DeviceSelector
	if sel == nil {
		return true
	}
	return matchesOptional(sel.Driver, s.Spec.Driver) && matchesOptional(sel.Pool, s.Spec.Pool.Name) && matchesOptional(sel.Device, device)
}

func matchesOptional(want *string, have string) bool {
	return want == nil || ptr.Deref(want, "") == have
}
