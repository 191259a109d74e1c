package agent

import (
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/prepare"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// withholdForeignInstances leaves unpublished the MIG partitions (and
// the whole GPU) whose slices hold a GPU instance that no claim in the
// checkpoint made: NVIDIA's mig-manager or an operator created it, and
// a workload may run on it. Offered, the scheduler would allocate its
// slices and the prepare would fail; the slices come back when the
// agent restarts after the instance is gone.
func withholdForeignInstances(logger klog.Logger, l *resources.Layout, p *prepare.Preparer, gpus []discovery.GPU) {
	for _, g := range gpus {
		for _, inst := range g.MIGInstances {
			if p.Owns(g.UUID, inst.Profile, inst.Start) {
				continue
			}
			if names := l.Withhold(g.Index, inst.Placement); len(names) > 0 {
				logger.Error(nil, "MIG instance not made by this agent: the partitions on its slices are not offered until it is destroyed and the agent restarts",
					"gpu", g.Index, "uuid", g.UUID, "instance", inst.ID, "start", inst.Start, "size", inst.Size, "withheld", names)
			}
		}
	}
}
