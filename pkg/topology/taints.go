package topology

import resourceapi "k8s.io/api/resource/v1"

// KeepsClaimsOff reports whether the taint keeps claims that do not
// tolerate it off its device: NoSchedule and NoExecute do, None (a taint
// only reported) does not.
func KeepsClaimsOff(t resourceapi.DeviceTaint) bool {
	return t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute
}
