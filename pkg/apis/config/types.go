package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// GPUTopologyArgs configures the GPUTopology plugin: how the engine chooses
// devices within a node, and how long it may look. The policy's parts are
// the engine's own types (allocator.PolicyPart, topology.Workload): the
// versioned form in v1 is the only other definition, for the wire.
type GPUTopologyArgs struct {
	metav1.TypeMeta

	// Topology prefers device sets with the best worst-pair link class,
	// then keeps free NVLink groups intact.
	Topology allocator.PolicyPart
	// MIG keeps large partitions placeable.
	MIG allocator.PolicyPart
	// Packing places shares of GPUs against fragmentation.
	Packing allocator.PolicyPart
	// Workload is the expected request mix Packing measures against.
	Workload topology.Workload
	// HostPressure weighs the free GPUs whose room the CPU and memory of
	// a CPU-only pod or a GPU share take, within Packing.
	HostPressure float64
	// LinkClassCost is what one link class below the node's best costs a
	// multi-GPU claim, in GPUs of fragmentation, within Packing.
	LinkClassCost float64
	// SearchBudget bounds the extra search steps per node.
	SearchBudget int32
	// FilterTimeout bounds one node's allocation; zero means no limit.
	FilterTimeout metav1.Duration
	// BindingTimeout bounds the wait for device binding conditions in
	// PreBind.
	BindingTimeout metav1.Duration
	// Drivers are the drivers whose devices the profile allocates; empty:
	// every driver's.
	Drivers []string
}

// Policy is the engine's policy these args describe.
func (a *GPUTopologyArgs) Policy() allocator.Policy {
	return allocator.Policy{
		Topology:      a.Topology,
		MIG:           a.MIG,
		Packing:       a.Packing,
		Workload:      a.Workload,
		HostPressure:  a.HostPressure,
		LinkClassCost: a.LinkClassCost,
		SearchBudget:  int(a.SearchBudget),
	}
}

// GPUCliquePlacementArgs configures the GPUCliquePlacement plugin, which
// places pod groups in multi-node NVLink cliques.
type GPUCliquePlacementArgs struct {
	metav1.TypeMeta

	// MaxPlacements caps the cliques proposed for one pod group: each is
	// a full trial of the group's pods.
	MaxPlacements int32
	// GPUClasses are the DeviceClasses whose requests count as whole
	// GPUs when the plugin estimates what a group needs, to skip cliques
	// too small for it.
	GPUClasses []string
}
