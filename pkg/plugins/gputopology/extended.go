package gputopology

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// draExtendedResources returns the extended resources the pod asks for
// that a DeviceClass maps to DRA (spec.extendedResourceName, or the
// implicit deviceclass.resource.kubernetes.io/<class>), with their class.
func (pl *GPUTopology) draExtendedResources(pod *v1.Pod) map[v1.ResourceName]string {
	if !pl.fts.EnableDRAExtendedResource {
		return nil // NodeResourcesFit then counts them as device plugin resources
	}
	resolver := pl.draManager.DeviceClassResolver()
	if resolver == nil {
		return nil
	}
	var out map[v1.ResourceName]string
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if q.IsZero() {
			continue
		}
		if class := resolver.GetDeviceClass(name); class != nil {
			if out == nil {
				out = map[v1.ResourceName]string{}
			}
			out[name] = class.Name
		}
	}
	return out
}

// extendedResourcesOn refuses a node where a DRA extended resource of
// the pod would have to come from DRA: GPUTopology does not allocate
// them yet, and binding the pod without devices would start it without
// the GPUs it asked for. A node whose device plugin advertises the
// resource serves it as before (NodeResourcesFit checks the amount).
func extendedResourcesOn(nodeInfo fwk.NodeInfo, extended map[v1.ResourceName]string) *fwk.Status {
	if len(extended) == 0 {
		return nil
	}
	scalar := nodeInfo.GetAllocatable().GetScalarResources()
	var viaDRA []string
	for name, class := range extended {
		if scalar[name] == 0 {
			viaDRA = append(viaDRA, fmt.Sprintf("%s (DeviceClass %s)", name, class))
		}
	}
	if len(viaDRA) == 0 {
		return nil
	}
	sort.Strings(viaDRA)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"extended resource %s is backed by DRA on this node, and GPUTopology does not allocate DRA extended resources: ask for the devices with a ResourceClaim, or use the default scheduler",
		strings.Join(viaDRA, ", ")))
}
