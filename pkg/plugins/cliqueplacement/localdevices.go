package cliqueplacement

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/topology"
)

// A pod of a group may need, beside its GPUs, devices of another kind on
// its node: NVIDIA's ComputeDomain gives each pod one IMEX channel, of
// which a node has one. A clique whose free GPUs sit on nodes whose
// channel is taken holds no such pod, and proposing it wastes a trial
// (with maxPlacements, it can crowd out a clique that fits). So the
// estimate of the pods a node can take is capped by those devices too:
// for requests of a class that admits one driver's devices only
// (gputopology.PinnedDriver), so that only that driver's devices are
// matched against the class. Anything the plugin cannot judge sets no
// cap, so that an estimate never hides a clique that could hold the
// group.

// podLocal counts, per device class, the devices the pod's unallocated
// claims (those in skip left out) ask for of classes that are not GPU
// classes and admit one driver's devices.
func (pl *CliquePlacement) podLocal(pod *v1.Pod, skip map[string]bool) map[string]int {
	var out map[string]int
	for _, claim := range pl.unallocatedClaims(pod, skip) {
		for _, r := range claim.Spec.Devices.Requests {
			e := r.Exactly
			if e == nil || pl.gpuClasses[e.DeviceClassName] || ptr.Deref(e.AdminAccess, false) ||
				(e.AllocationMode != "" && e.AllocationMode != resourceapi.DeviceAllocationModeExactCount) {
				continue
			}
			if class, err := pl.draManager.DeviceClasses().Get(e.DeviceClassName); err != nil || gputopology.PinnedDriver(class) == "" {
				continue
			}
			if out == nil {
				out = map[string]int{}
			}
			out[e.DeviceClassName] += int(max(e.Count, 1))
		}
	}
	return out
}

// leastOfEach is, for each class every map names, the least count.
func leastOfEach(ms []map[string]int) map[string]int {
	if len(ms) == 0 {
		return nil
	}
	var out map[string]int
	for class, n := range ms[0] {
		least := n
		for _, m := range ms[1:] {
			least = min(least, m[class]) // 0 when a pod does not ask
		}
		if least > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[class] = least
		}
	}
	return out
}

// localCaps is, per node, how many of the group's pods its free devices
// of the local classes allow (a node without any holds none); nil when
// the pods need none.
func (pl *CliquePlacement) localCaps(ctx context.Context, local map[string]int, dra *draState) map[string]int {
	if len(local) == 0 {
		return nil
	}
	current := topology.AllocatableSlices(dra.slices)
	var caps map[string]int
	for className, perPod := range local {
		class, err := pl.draManager.DeviceClasses().Get(className)
		if err != nil {
			continue
		}
		free, ok := pl.freeOfClass(ctx, class, current, dra.taken)
		if !ok {
			continue
		}
		if caps == nil {
			caps = make(map[string]int, len(free))
			for node, n := range free {
				caps[node] = n / perPod
			}
			continue
		}
		for node, c := range caps {
			caps[node] = min(c, free[node]/perPod)
		}
	}
	return caps
}

// freeOfClass counts, per node, the free devices of the class's driver
// in the current slices that the class's selectors admit. A selector that fails on a device
// counts the device, as the estimate must not hide room. It cannot count
// (false) when the class admits a device that no one node has (a slice
// for all nodes, or selecting them by label) or that takes several
// allocations (a shared device, free while its capacity lasts).
func (pl *CliquePlacement) freeOfClass(ctx context.Context, class *resourceapi.DeviceClass, current []*resourceapi.ResourceSlice, taken topology.DeviceTaken) (map[string]int, bool) {
	driver := gputopology.PinnedDriver(class)
	free := map[string]int{}
	for _, s := range current {
		if s.Spec.Driver != driver {
			continue
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if !pl.admits(ctx, class, driver, d) {
				continue
			}
			node := topology.DeviceNode(s, d)
			if node == "" || ptr.Deref(d.AllowMultipleAllocations, false) {
				return nil, false
			}
			if !taken(driver, s.Spec.Pool.Name, d.Name) {
				free[node]++
			}
		}
	}
	return free, true
}

// admits: every CEL selector of the class admits the device (or cannot
// say).
func (pl *CliquePlacement) admits(ctx context.Context, class *resourceapi.DeviceClass, driver string, d *resourceapi.Device) bool {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		expr := pl.celCache.GetOrCompile(sel.CEL.Expression)
		if expr.Error != nil {
			return true
		}
		ok, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			klog.FromContext(ctx).V(5).Info("Class selector failed on a device; counted free", "class", class.Name, "device", d.Name, "err", err)
			return true
		}
		if !ok {
			return false
		}
	}
	return true
}
