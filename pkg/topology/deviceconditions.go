package topology

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeviceConditions are the conditions the driver reported in the claim's
// status for one of its allocated devices (a share by its share ID).
func DeviceConditions(claim *resourceapi.ResourceClaim, r *resourceapi.DeviceRequestAllocationResult) []metav1.Condition {
	for _, d := range claim.Status.Devices {
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device && (r.ShareID == nil || d.ShareID != nil && *d.ShareID == string(*r.ShareID)) {
			return d.Conditions
		}
	}
	return nil
}

// DeviceCondition is one condition of one allocated device.
type DeviceCondition struct {
	Device    *resourceapi.DeviceRequestAllocationResult
	Condition string
}

// String is "pool/device (condition)".
func (dc DeviceCondition) String() string {
	return fmt.Sprintf("%s/%s (%s)", dc.Device.Pool, dc.Device.Device, dc.Condition)
}

// JoinDeviceConditions writes the conditions as String does, separated by
// spaces.
func JoinDeviceConditions(dcs []DeviceCondition) string {
	out := make([]string, len(dcs))
	for i, dc := range dcs {
		out[i] = dc.String()
	}
	return strings.Join(out, " ")
}

// BindingStatus is where the allocation's device binding conditions
// stand, in allocation order: the binding failure conditions its devices
// report true (failed), and the binding conditions not yet true
// (waiting). Both empty: nothing to wait for, or all met. The scheduler
// decides by it, and kubectl gputopo shows it.
func BindingStatus(claim *resourceapi.ResourceClaim) (failed, waiting []DeviceCondition) {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil, nil
	}
	for i := range alloc.Devices.Results {
		r := &alloc.Devices.Results[i]
		conds := DeviceConditions(claim, r)
		for _, f := range r.BindingFailureConditions {
			if apimeta.IsStatusConditionTrue(conds, f) {
				failed = append(failed, DeviceCondition{r, f})
			}
		}
		for _, b := range r.BindingConditions {
			if !apimeta.IsStatusConditionTrue(conds, b) {
				waiting = append(waiting, DeviceCondition{r, b})
			}
		}
	}
	return failed, waiting
}
