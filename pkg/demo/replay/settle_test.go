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
		{"counts dropped, kinds sorted, a few variants kept",
			"0/300 nodes are available: 496 Insufficient cpu, 20 cannot allocate all claims (request gpu: needs 1, 4 match, 0 free (4 capacity exhausted)), 150 node(s) didn't match Pod's node affinity/selector, 231 cannot allocate all claims (request gpu: needs 1, 8 match, 0 free (8 capacity exhausted)), 32 Insufficient memory.",
			"Insufficient cpu, Insufficient memory, cannot allocate all claims (request gpu: needs 1, 4 match, 0 free (4 capacity exhausted)), cannot allocate all claims (request gpu: needs 1, 8 match, 0 free (8 capacity exhausted))"},
		{"details that differ on many kinds of node merged",
			"0/300 nodes are available: 496 Insufficient cpu, 20 cannot allocate all claims (request gpu: needs 1, 4 match, 0 free (4 capacity exhausted)), 231 cannot allocate all claims (request gpu: needs 1, 8 match, 0 free (8 capacity exhausted)), 2 cannot allocate all claims (request gpu: needs 1, 1 match, 0 free (1 capacity exhausted)), 429 cannot allocate all claims (request gpu: needs 1, 2 match, 0 free (2 capacity exhausted)).",
			"Insufficient cpu, cannot allocate all claims"},
		{"nodes where nothing matches are left out when others say more",
			"0/14 nodes are available: 7 node(s) didn't match Pod's node affinity/selector, 6 cannot allocate all claims (request gpu: needs 1, 0 match, 0 free), 1 cannot allocate all claims (request gpu: needs 1, 16 match, 0 free (5 in use, 11 shared counters exhausted)).",
			"cannot allocate all claims (request gpu: needs 1, 16 match, 0 free (5 in use, 11 shared counters exhausted))"},
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
