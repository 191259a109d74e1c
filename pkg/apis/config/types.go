package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GPUTopologyArgs configures the GPUTopology plugin: how the engine chooses
// devices within a node, and how long it may look.
type GPUTopologyArgs struct {
	metav1.TypeMeta

	// Topology prefers device sets with the best worst-pair link class,
	// then keeps free NVLink groups intact.
	Topology PolicyPart
	// MIG keeps large partitions placeable.
	MIG PolicyPart
	// Packing places shares of GPUs against fragmentation.
	Packing PolicyPart
	// Workload is the expected request mix Packing measures against.
	Workload []TaskClass
	// SearchBudget bounds the extra search steps per node.
	SearchBudget int32
	// FilterTimeout bounds one node's allocation; zero means no limit.
	FilterTimeout metav1.Duration
	// BindingTimeout bounds the wait for device binding conditions in
	// PreBind.
	BindingTimeout metav1.Duration
}

// PolicyPart switches one criterion on or off and weighs it.
type PolicyPart struct {
	Enabled bool
	Weight  float64
}

// TaskClass is one kind of request in the expected workload.
type TaskClass struct {
	GPUs      int32
	Share     float64
	Weight    float64
	CPUMilli  int64
	MemoryMiB int64
}
