package gputopology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// nodeResources is a node's allocatable and requested CPU and memory; the
// rest of fwk.NodeInfo is not used by hostUse.
type nodeResources struct {
	fwk.NodeInfo
	allocatable, requested resources
}

type resources struct {
	fwk.Resource
	milliCPU, memory int64
}

func (r resources) GetMilliCPU() int64 { return r.milliCPU }
func (r resources) GetMemory() int64   { return r.memory }

func (n nodeResources) GetAllocatable() fwk.Resource { return n.allocatable }
func (n nodeResources) GetRequested() fwk.Resource   { return n.requested }

func TestHostUse(t *testing.T) {
	const gi = int64(1) << 30
	pod := topology.Host{CPUMilli: 8000, MemoryMiB: 16384}
	tests := []struct {
		name string
		node nodeResources
		want *allocator.HostUse
	}{
		{"free is allocatable less requested, in MiB",
			nodeResources{allocatable: resources{milliCPU: 96000, memory: 384 * gi}, requested: resources{milliCPU: 90000, memory: 100 * gi}},
			&allocator.HostUse{Free: topology.Host{CPUMilli: 6000, MemoryMiB: 284 * 1024}, Pod: pod}},
		{"overcommitted node has less than nothing",
			nodeResources{allocatable: resources{milliCPU: 4000, memory: gi}, requested: resources{milliCPU: 5000, memory: gi}},
			&allocator.HostUse{Free: topology.Host{CPUMilli: -1000}, Pod: pod}},
		{"node without allocatable CPU is not judged by it",
			nodeResources{allocatable: resources{memory: gi}}, nil},
		{"node without allocatable memory is not judged by it",
			nodeResources{allocatable: resources{milliCPU: 4000}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, hostUse(tc.node, pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
