package replay

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestReason(t *testing.T) {
	pending := func(msg string) *v1.Pod {
		return &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: msg}}}}
	}
	tests := []struct {
		name, msg, want string
	}{
		{"one clause keeps its details, without the claim's name",
			"0/28 nodes are available: 14 node(s) didn't match Pod's node affinity/selector, 14 cannot allocate all claims (claim demo-gputopo/p1-gpu-x2k, request gpu: needs 8, 8 match, 2 free (6 in use)). preemption: 0/28 nodes are available: 28 Preemption is not helpful for scheduling.",
			"cannot allocate all claims (request gpu: needs 8, 8 match, 2 free (6 in use))"},
		{"counts dropped, kinds sorted, details that differ per node merged",
			"0/300 nodes are available: 496 Insufficient cpu, 20 cannot allocate all claims (request gpu: needs 1, 4 match, 0 free (4 capacity exhausted)), 150 node(s) didn't match Pod's node affinity/selector, 231 cannot allocate all claims (request gpu: needs 1, 8 match, 0 free (8 capacity exhausted)), 32 Insufficient memory.",
			"Insufficient cpu, Insufficient memory, cannot allocate all claims"},
		{"only the other copy", "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", "no node fits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := reason(pending(tc.msg)); got != tc.want {
				t.Errorf("reason = %q\nwant     %q", got, tc.want)
			}
		})
	}
	if got := reason(&v1.Pod{}); got != "not yet scheduled" {
		t.Errorf("pod without condition: %q", got)
	}
}
