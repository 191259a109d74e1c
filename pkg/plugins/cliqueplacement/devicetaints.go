package cliqueplacement

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/topology"
)

// untaintedOnly counts as free only the GPUs without a NoSchedule or
// NoExecute taint: a group none of whose GPU requests tolerates a device
// taint cannot take the others (the node agent's health taint on a
// failing GPU, a DeviceTaintRule for maintenance), and a clique whose
// free GPUs are such would be proposed for a trial bound to fail. A group
// that tolerates some taint keeps them counted: which taints its
// tolerations cover shows in the trial. It also returns how many it left
// out, for the group's message.
func (pl *CliquePlacement) untaintedOnly(gpus map[string]*topology.NodeGPUs, pods []*v1.Pod) (map[string]*topology.NodeGPUs, int) {
	if !pl.fts.EnableDRADeviceTaints || pl.toleratesDeviceTaints(pods) {
		return gpus, 0
	}
	out := make(map[string]*topology.NodeGPUs, len(gpus))
	left := 0
	for node, g := range gpus {
		if g.FreeTainted > 0 {
			left += g.FreeTainted
			c := *g
			c.Free, c.FreeTainted = g.Free-g.FreeTainted, 0
			g = &c
		}
		out[node] = g
	}
	return out, left
}

// withTaintedLeftOut adds to a refusal the free GPUs untaintedOnly left
// out: `kubectl gputopo nodes` shows them free.
func withTaintedLeftOut(status *fwk.Status, left int) *fwk.Status {
	if status == nil || left == 0 {
		return status
	}
	return fwk.NewStatus(status.Code(), fmt.Sprintf("%s (%d more free GPUs carry a NoSchedule or NoExecute device taint, and no GPU request of the group has tolerations)", status.Message(), left))
}

// toleratesDeviceTaints: some request of a GPU class in the pods' claims
// has tolerations, or a claim cannot be read (an estimate never hides a
// clique that could hold the group). The claims for extended resources
// have none.
func (pl *CliquePlacement) toleratesDeviceTaints(pods []*v1.Pod) bool {
	for _, p := range pods {
		for _, name := range claimNames(p) {
			claim, err := pl.draManager.ResourceClaims().Get(p.Namespace, name)
			if err != nil {
				return true
			}
			for _, r := range claim.Spec.Devices.Requests {
				if pl.gpuRequestTolerates(r) {
					return true
				}
			}
		}
	}
	return false
}

func (pl *CliquePlacement) gpuRequestTolerates(r resourceapi.DeviceRequest) bool {
	if r.Exactly != nil {
		return pl.gpuClasses[r.Exactly.DeviceClassName] && len(r.Exactly.Tolerations) > 0
	}
	for _, sub := range r.FirstAvailable {
		if pl.gpuClasses[sub.DeviceClassName] && len(sub.Tolerations) > 0 {
			return true
		}
	}
	return false
}
