package agent

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// defaultMIGPollInterval is how often the GPU instances of GPUs in MIG
// mode are listed again, to notice those that others make or destroy.
const defaultMIGPollInterval = 30 * time.Second

// withholdForeignInstances leaves unpublished the MIG partitions (and
// the whole GPU) whose slices hold a GPU instance, found at start, that
// no claim in the checkpoint made: NVIDIA's mig-manager or an operator
// created it, and a workload may run on it. Offered, the scheduler would
// allocate its slices and the prepare would fail. followForeignInstances
// offers them again once the instance is gone.
func (a *Agent) withholdForeignInstances(logger klog.Logger) {
	for _, g := range a.gpus {
		a.withholdOthers(logger, g.Index, g.UUID, func() ([]discovery.MIGInstance, error) { return g.MIGInstances, nil })
	}
}

// followForeignInstances lists the instances of every GPU in MIG mode
// again at each interval, and republishes when the partitions withheld
// change: an instance another tool made since, or one that is gone.
func (a *Agent) followForeignInstances(ctx context.Context) {
	a.everyInterval(ctx, a.opts.MIGPollInterval, defaultMIGPollInterval, "Republishing after MIG instances made or destroyed by others", func() bool {
		return a.rereadForeignInstances(klog.FromContext(ctx))
	})
}

// rereadForeignInstances withholds what the instances that others made
// hold now; it says whether that changed. A GPU that does not answer
// keeps what was withheld. A GPU's UUID, index and MIG mode never
// change, so they are read without publishMu.
func (a *Agent) rereadForeignInstances(logger klog.Logger) (changed bool) {
	for i := range a.gpus {
		uuid, index := a.gpus[i].UUID, a.gpus[i].Index
		if !a.gpus[i].MIGEnabled {
			continue
		}
		d, ret := a.opts.NVML.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			continue
		}
		list := func() ([]discovery.MIGInstance, error) { return discovery.MIGInstances(d) }
		changed = a.withholdOthers(logger, index, uuid, list) || changed
	}
	return changed
}

// withholdOthers withholds on GPU index what the instances that list
// finds and no claim made hold, and says whether that changed; a list
// that fails keeps what was withheld. The list waits for a prepare in
// progress (Preparer.Unowned), so it is taken before publishMu:
// publishing (after a health change) does not wait for it. Only Start
// and then followForeignInstances change what is withheld.
func (a *Agent) withholdOthers(logger klog.Logger, index int, uuid string, list func() ([]discovery.MIGInstance, error)) bool {
	others, err := a.preparer.Unowned(uuid, list)
	if err != nil {
		logger.V(2).Info("MIG instances not listed", "gpu", index, "uuid", uuid, "err", err)
		return false
	}
	a.publishMu.Lock()
	withheld, changed := a.layout.WithholdOnly(index, placements(others))
	a.publishMu.Unlock()
	switch {
	case !changed:
	case len(others) == 0:
		logger.Info("MIG instances made by others are gone: the GPU's partitions are offered again", "gpu", index, "uuid", uuid)
	default:
		for _, inst := range others {
			logger.Error(nil, "MIG instance not made by this agent: the partitions on its slices are not offered until it is destroyed",
				"gpu", index, "uuid", uuid, "instance", inst.ID, "start", inst.Start, "size", inst.Size, "withheld", withheld)
		}
	}
	return changed
}

func placements(instances []discovery.MIGInstance) []discovery.Placement {
	out := make([]discovery.Placement, len(instances))
	for i, inst := range instances {
		out[i] = inst.Placement
	}
	return out
}
