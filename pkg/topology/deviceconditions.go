package topology

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeviceConditions are the conditions the driver reported in the claim's
// status for one of its allocated devices (a share by its share ID): the
// binding conditions the scheduler waits on and kubectl gputopo shows.
func DeviceConditions(claim *resourceapi.ResourceClaim, r *resourceapi.DeviceRequestAllocationResult) []metav1.Condition {
	for _, d := range claim.Status.Devices {
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device && (r.ShareID == nil || d.ShareID != nil && *d.ShareID == string(*r.ShareID)) {
			return d.Conditions
		}
	}
	return nil
}
