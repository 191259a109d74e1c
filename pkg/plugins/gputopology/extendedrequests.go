package gputopology

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/contract"
)

// extendedRequests turns the pod's DRA extended resources (resource ->
// DeviceClass) into the requests of its extended-resource claim and the
// mapping from each container's resource to a request, with upstream's
// names and rules (KEP-5004), so that the kubelet and the node agent read
// our claims as they read the in-tree plugin's:
//
//   - a request per container and resource, named
//     container-<i>-request-<j>: i indexes init containers then containers,
//     j the resource among the container's sorted request names;
//   - regular containers and sidecars (restartable init containers) run
//     together and get requests of their own;
//   - a plain init container runs before the containers after it and
//     reuses their devices, asking only for what they lack; plain init
//     containers run one at a time, so only the largest of their requests
//     is kept and all of them map to it;
//   - requests sorted by name; mappings by resource, long-running
//     containers first.
func extendedRequests(pod *v1.Pod, classOf map[v1.ResourceName]string) ([]resourceapi.DeviceRequest, []v1.ContainerExtendedResourceRequest) {
	containers := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	inits := len(pod.Spec.InitContainers)
	names := make([]v1.ResourceName, 0, len(classOf))
	for name := range classOf {
		names = append(names, name)
	}
	slices.Sort(names)
	var requests []resourceapi.DeviceRequest
	var mappings []v1.ContainerExtendedResourceRequest
	for _, name := range names {
		reqs, maps := resourceRequests(containers, inits, name, classOf[name])
		requests = append(requests, reqs...)
		mappings = append(mappings, maps...)
	}
	slices.SortFunc(requests, func(a, b resourceapi.DeviceRequest) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return requests, mappings
}

// runsThroughout: regular containers and sidecars.
func runsThroughout(c v1.Container, index, inits int) bool {
	return index >= inits || (c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways)
}

// resourceRequests is extendedRequests for one resource.
func resourceRequests(containers []v1.Container, inits int, name v1.ResourceName, class string) ([]resourceapi.DeviceRequest, []v1.ContainerExtendedResourceRequest) {
	// own[i]: the request of long-running container i, nil if none.
	own := make([]*resourceapi.DeviceRequest, len(containers))
	var longMaps []v1.ContainerExtendedResourceRequest
	for i, c := range containers {
		if !runsThroughout(c, i, inits) {
			continue
		}
		if n := containerAmount(c, name); n > 0 {
			own[i] = deviceRequest(c, i, name, class, n)
			longMaps = append(longMaps, mapping(c, name, own[i].Name))
		}
	}
	var largest *resourceapi.DeviceRequest
	var initMaps []v1.ContainerExtendedResourceRequest
	initRequests := map[string]bool{}
	for i, c := range containers {
		if runsThroughout(c, i, inits) {
			continue
		}
		want := containerAmount(c, name)
		if want == 0 {
			continue
		}
		// Devices of the long-running containers after it, in order,
		// until they cover what it asks for.
		have := int64(0)
		for _, r := range own[i:] {
			if r == nil || have >= want {
				continue
			}
			have += r.Exactly.Count
			initMaps = append(initMaps, mapping(c, name, r.Name))
		}
		if have >= want {
			continue
		}
		r := deviceRequest(c, i, name, class, want-have)
		initRequests[r.Name] = true
		initMaps = append(initMaps, mapping(c, name, r.Name))
		if largest == nil || r.Exactly.Count > largest.Exactly.Count {
			largest = r
		}
	}
	var requests []resourceapi.DeviceRequest
	if largest != nil {
		requests = append(requests, *largest)
		for k := range initMaps {
			if initRequests[initMaps[k].RequestName] {
				initMaps[k].RequestName = largest.Name
			}
		}
	}
	for _, r := range own {
		if r != nil {
			requests = append(requests, *r)
		}
	}
	return requests, append(longMaps, initMaps...)
}

// containerAmount is how many of the resource the container requests; 0
// for none or an amount that is not a whole number.
func containerAmount(c v1.Container, name v1.ResourceName) int64 {
	q, ok := c.Resources.Requests[name]
	if !ok {
		return 0
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0
	}
	return n
}

// deviceRequest asks for n devices of class for container i's resource.
func deviceRequest(c v1.Container, i int, name v1.ResourceName, class string, n int64) *resourceapi.DeviceRequest {
	keys := make([]string, 0, len(c.Resources.Requests))
	for k := range c.Resources.Requests {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	return &resourceapi.DeviceRequest{
		Name: contract.ExtendedRequestName(i, slices.Index(keys, string(name))),
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: class,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           n,
		},
	}
}

func mapping(c v1.Container, name v1.ResourceName, request string) v1.ContainerExtendedResourceRequest {
	return v1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(name), RequestName: request}
}
