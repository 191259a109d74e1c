package gputopology

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUCliquePlacement asks whether GPUTopology of its profile will free a
// claim for its binding conditions: failed, or not all met within that
// profile's bindingTimeout of the allocation. A profile without
// GPUTopology counts only failures; with the binding gates off nothing.
func TestBindingUnusable(t *testing.T) {
	now := time.Now()
	bindingRules.Store("ten-minutes", bindingRule{enabled: true, timeout: 10 * time.Minute})
	bindingRules.Store("gates-off", bindingRule{timeout: 10 * time.Minute})
	t.Cleanup(func() {
		bindingRules.Delete("ten-minutes")
		bindingRules.Delete("gates-off")
	})
	claim := func(allocatedAgo time.Duration, reported string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
		c.Status.Allocation = &resourceapi.AllocationResult{
			AllocationTimestamp: &metav1.Time{Time: now.Add(-allocatedAgo)},
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpus", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0",
				BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"},
			}}},
		}
		if reported != "" {
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0",
				Conditions: []metav1.Condition{{Type: reported, Status: metav1.ConditionTrue}}}}
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		profile string
		claim   *resourceapi.ResourceClaim
		want    bool
	}{
		{"binding", "ten-minutes", claim(time.Minute, ""), false},
		{"timed out", "ten-minutes", claim(time.Hour, ""), true},
		{"attached long ago", "ten-minutes", claim(time.Hour, "Attached"), false},
		{"failed", "ten-minutes", claim(time.Minute, "AttachFailed"), true},
		{"not allocated", "ten-minutes", &resourceapi.ResourceClaim{}, false},
		{"no GPUTopology: timed out", "in-tree", claim(time.Hour, ""), false},
		{"no GPUTopology: failed", "in-tree", claim(time.Minute, "AttachFailed"), true},
		{"gates off: failed", "gates-off", claim(time.Minute, "AttachFailed"), false},
	} {
		if got := BindingUnusable(tc.profile, tc.claim, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
