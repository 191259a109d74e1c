package gputopology

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
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

// TestFilterTimeout: filterTimeout reaches the engine's search, which
// keeps the best allocation found by then instead of searching on.
func TestFilterTimeout(t *testing.T) {
	// 20 NVLink pairs: a 2-GPU claim has 210 solutions to compare.
	pairs := gpuSlice("node-a", 40, func(i int) string { return fmt.Sprintf("pair-%d", i/2) })
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		explored func(n int) bool
	}{
		{"no timeout: every solution", 0, func(n int) bool { return n == 210 }},
		{"past at once: the best of the first", time.Nanosecond, func(n int) bool { return n >= 1 && n < 210 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, objects{
				nodes:   []*v1.Node{node("node-a")},
				classes: []*resourceapi.DeviceClass{gpuClass},
				slices:  []*resourceapi.ResourceSlice{pairs},
				claims:  []*resourceapi.ResourceClaim{claim("two", 2).Obj()},
			})
			env.pl.args.FilterTimeout.Duration = tc.timeout
			pod := podWithClaims("p", "two")
			if _, status := env.pl.PreFilter(env.tCtx, env.state, pod, nil); !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
			wantStatus(t, "Filter", env.pl.Filter(env.tCtx, env.state, pod, env.nodes["node-a"]), fwk.Success, "")
			s, _ := getState(env.state)
			if n := s.result("node-a").Quality.Explored; !tc.explored(n) {
				t.Errorf("explored %d solutions", n)
			}
		})
	}
}
