package gputopology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

const gpuResource = v1.ResourceName("nvidia.com/gpu")

// container asks for the amounts, by resource name.
func container(name string, amounts map[v1.ResourceName]int64) v1.Container {
	reqs := v1.ResourceList{}
	for n, a := range amounts {
		reqs[n] = *resource.NewQuantity(a, resource.DecimalSI)
	}
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: reqs}}
}

func sidecar(c v1.Container) v1.Container {
	c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return c
}

func request(name, class string, n int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n}}
}

func mapped(c, res, req string) v1.ContainerExtendedResourceRequest {
	return v1.ContainerExtendedResourceRequest{ContainerName: c, ResourceName: res, RequestName: req}
}

// The names and rules of upstream's extended-resource claims (KEP-5004),
// case by case; TestExtendedResourceParity compares whole claims with the
// in-tree plugin's on a real API server.
func TestExtendedRequests(t *testing.T) {
	gpu := map[v1.ResourceName]string{gpuResource: "gpu.nvidia.com"}
	tests := []struct {
		name         string
		init, main   []v1.Container
		classOf      map[v1.ResourceName]string
		wantRequests []resourceapi.DeviceRequest
		wantMappings []v1.ContainerExtendedResourceRequest
	}{
		{
			name:         "one container",
			main:         []v1.Container{container("main", map[v1.ResourceName]int64{gpuResource: 2})},
			classOf:      gpu,
			wantRequests: []resourceapi.DeviceRequest{request("container-0-request-0", "gpu.nvidia.com", 2)},
			wantMappings: []v1.ContainerExtendedResourceRequest{mapped("main", "nvidia.com/gpu", "container-0-request-0")},
		},
		{
			name:         "the resource's index among the container's sorted requests",
			main:         []v1.Container{container("main", map[v1.ResourceName]int64{gpuResource: 1, v1.ResourceCPU: 4})},
			classOf:      gpu,
			wantRequests: []resourceapi.DeviceRequest{request("container-0-request-1", "gpu.nvidia.com", 1)},
			wantMappings: []v1.ContainerExtendedResourceRequest{mapped("main", "nvidia.com/gpu", "container-0-request-1")},
		},
		{
			name:    "two containers",
			main:    []v1.Container{container("a", map[v1.ResourceName]int64{gpuResource: 2}), container("b", map[v1.ResourceName]int64{gpuResource: 1})},
			classOf: gpu,
			wantRequests: []resourceapi.DeviceRequest{
				request("container-0-request-0", "gpu.nvidia.com", 2), request("container-1-request-0", "gpu.nvidia.com", 1)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapped("a", "nvidia.com/gpu", "container-0-request-0"), mapped("b", "nvidia.com/gpu", "container-1-request-0")},
		},
		{
			name:    "an init container reuses the devices of the containers after it and asks for the rest",
			init:    []v1.Container{container("init", map[v1.ResourceName]int64{gpuResource: 4})},
			main:    []v1.Container{container("main", map[v1.ResourceName]int64{gpuResource: 2})},
			classOf: gpu,
			wantRequests: []resourceapi.DeviceRequest{
				request("container-0-request-0", "gpu.nvidia.com", 2), request("container-1-request-0", "gpu.nvidia.com", 2)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapped("main", "nvidia.com/gpu", "container-1-request-0"),
				mapped("init", "nvidia.com/gpu", "container-1-request-0"), mapped("init", "nvidia.com/gpu", "container-0-request-0")},
		},
		{
			name:         "an init container covered by a later container asks for nothing",
			init:         []v1.Container{container("init", map[v1.ResourceName]int64{gpuResource: 1})},
			main:         []v1.Container{container("main", map[v1.ResourceName]int64{gpuResource: 2})},
			classOf:      gpu,
			wantRequests: []resourceapi.DeviceRequest{request("container-1-request-0", "gpu.nvidia.com", 2)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapped("main", "nvidia.com/gpu", "container-1-request-0"), mapped("init", "nvidia.com/gpu", "container-1-request-0")},
		},
		{
			name:         "init containers run one at a time: the largest request serves them all",
			init:         []v1.Container{container("first", map[v1.ResourceName]int64{gpuResource: 1}), container("second", map[v1.ResourceName]int64{gpuResource: 3})},
			main:         []v1.Container{container("main", nil)},
			classOf:      gpu,
			wantRequests: []resourceapi.DeviceRequest{request("container-1-request-0", "gpu.nvidia.com", 3)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapped("first", "nvidia.com/gpu", "container-1-request-0"), mapped("second", "nvidia.com/gpu", "container-1-request-0")},
		},
		{
			name:    "a sidecar runs with the containers and has its own request",
			init:    []v1.Container{sidecar(container("proxy", map[v1.ResourceName]int64{gpuResource: 1}))},
			main:    []v1.Container{container("main", map[v1.ResourceName]int64{gpuResource: 1})},
			classOf: gpu,
			wantRequests: []resourceapi.DeviceRequest{
				request("container-0-request-0", "gpu.nvidia.com", 1), request("container-1-request-0", "gpu.nvidia.com", 1)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapped("proxy", "nvidia.com/gpu", "container-0-request-0"), mapped("main", "nvidia.com/gpu", "container-1-request-0")},
		},
		{
			name:    "two resources of two classes",
			main:    []v1.Container{container("main", map[v1.ResourceName]int64{"example.com/b": 1, "example.com/a": 2})},
			classOf: map[v1.ResourceName]string{"example.com/a": "class-a", "example.com/b": "class-b"},
			wantRequests: []resourceapi.DeviceRequest{
				request("container-0-request-0", "class-a", 2), request("container-0-request-1", "class-b", 1)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapped("main", "example.com/a", "container-0-request-0"), mapped("main", "example.com/b", "container-0-request-1")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: tc.init, Containers: tc.main}}
			reqs, maps := extendedRequests(pod, tc.classOf)
			if diff := cmp.Diff(tc.wantRequests, reqs); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMappings, maps); diff != "" {
				t.Errorf("mappings (-want +got):\n%s", diff)
			}
		})
	}
}
