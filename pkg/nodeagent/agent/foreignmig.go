package agent

import (
	"context"
	"fmt"
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
		if !g.MIGEnabled {
			continue
		}
		list := func() ([]discovery.MIGInstance, error) {
			d, ret := a.opts.NVML.DeviceGetHandleByUUID(g.UUID)
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("GPU %s: %s", g.UUID, nvml.ErrorString(ret))
			}
			return discovery.MIGInstances(d)
		}
		if _, err := a.withholdOthers(logger, g.Index, g.UUID, list); err != nil {
			// Offered, its partitions could be slices another's instance
			// holds: the whole GPU waits until a list works.
			a.publishMu.Lock()
			a.layout.WithholdOnly(g.Index, []discovery.Placement{{Start: 0, Size: g.MemorySlices()}})
			a.publishMu.Unlock()
			logger.Error(err, "MIG instances not listed at start: the GPU's partitions are not offered until they can be", "gpu", g.Index, "uuid", g.UUID)
		}
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
		c, _ := a.withholdOthers(logger, index, uuid, list)
		changed = c || changed
	}
	return changed
}

// withholdOthers withholds on GPU index what the instances that list
// finds and no claim made hold, and says whether that changed; a list
// that fails keeps what was withheld, and is returned. The list waits for a prepare in
// progress (Preparer.Unowned), so it is taken before publishMu:
// publishing (after a health change) does not wait for it. Only Start
// and then followForeignInstances change what is withheld.
func (a *Agent) withholdOthers(logger klog.Logger, index int, uuid string, list func() ([]discovery.MIGInstance, error)) (bool, error) {
	others, err := a.preparer.Unowned(uuid, list)
	if err != nil {
		logger.V(2).Info("MIG instances not listed", "gpu", index, "uuid", uuid, "err", err)
		return false, err
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
	return changed, nil
}

func placements(instances []discovery.MIGInstance) []discovery.Placement {
	out := make([]discovery.Placement, len(instances))
	for i, inst := range instances {
		out[i] = inst.Placement
	}
	return out
}
