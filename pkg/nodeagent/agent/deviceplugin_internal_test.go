package agent

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// What NVIDIA's device plugin advertises under each of its strategies
// counts, in capacity as in allocatable; other resources do not.
func TestDevicePluginGPUs(t *testing.T) {
	list := func(kv ...any) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i].(string))] = *resource.NewQuantity(int64(kv[i+1].(int)), resource.DecimalSI)
		}
		return l
	}
	for _, tc := range []struct {
		name                  string
		capacity, allocatable v1.ResourceList
		want                  int64
	}{
		{"none", list("cpu", 64, "example.com/fpga", 2), list("cpu", 64), 0},
		{"whole GPUs", list("nvidia.com/gpu", 8), list("nvidia.com/gpu", 8), 8},
		{"all unhealthy: allocatable 0", list("nvidia.com/gpu", 8), list("nvidia.com/gpu", 0), 8},
		{"gone: the kubelet keeps it at 0", list("nvidia.com/gpu", 0), list("nvidia.com/gpu", 0), 0},
		{"time-slicing renamed", list("nvidia.com/gpu.shared", 32), list("nvidia.com/gpu.shared", 32), 32},
		{"MIG mixed", list("nvidia.com/gpu", 0, "nvidia.com/mig-1g.10gb", 14, "nvidia.com/mig-3g.40gb", 4), list("nvidia.com/mig-1g.10gb", 14, "nvidia.com/mig-3g.40gb", 4), 18},
		{"the clique label's name is no resource of it", list("nvidia.com/gpu.clique", 1), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{Status: v1.NodeStatus{Capacity: tc.capacity, Allocatable: tc.allocatable}}
			if got := devicePluginGPUs(node); got != tc.want {
				t.Errorf("devicePluginGPUs = %d, want %d", got, tc.want)
			}
		})
	}
}
