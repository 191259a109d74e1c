package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GroupVersion of the arguments.
const (
	Group   = "gputopo.io"
	Version = "v1"
	Kind    = "GPUTopologyArgs"
)

// GPUTopologyArgs is the versioned form of config.GPUTopologyArgs.
type GPUTopologyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Topology: NVLink locality of multi-GPU claims and intact free
	// NVLink groups. Default: enabled, weight 1.
	Topology *PolicyPart `json:"topology,omitempty"`
	// MIG: keep large partitions placeable. Default: enabled, weight 1.
	MIG *PolicyPart `json:"mig,omitempty"`
	// Packing: place GPU shares against fragmentation. Default: enabled,
	// weight 1.
	Packing *PolicyPart `json:"packing,omitempty"`
	// Workload: the expected mix of requests Packing measures against.
	// Default: a summary of the openb production trace.
	Workload []TaskClass `json:"workload,omitempty"`
	// HostPressure: within Packing, how much the free GPUs whose room the
	// CPU and memory of a CPU-only pod or a GPU share take count next to
	// the growth of fragmentation (docs/scheduler.md). Default 0.2; 0
	// measures fragmentation alone.
	HostPressure *float64 `json:"hostPressure,omitempty"`
	// LinkClassCost: within Packing, what one link class below the best a
	// node offers a multi-GPU claim costs, in GPUs of expected
	// fragmentation: the trade-off between link quality now and room for
	// later jobs (docs/scheduler.md). Default 0.25; 0 packs first and leaves
	// links to GPUTopology's score.
	LinkClassCost *float64 `json:"linkClassCost,omitempty"`
	// SearchBudget: extra search steps per node after the first feasible
	// allocation. Default 20000; 0 returns the first allocation found.
	SearchBudget *int32 `json:"searchBudget,omitempty"`
	// FilterTimeout: limit for one node's allocation. Default 10s; 0 means
	// no limit.
	FilterTimeout *metav1.Duration `json:"filterTimeout,omitempty"`
	// BindingTimeout: how long PreBind waits for device binding
	// conditions. Default 10m.
	BindingTimeout *metav1.Duration `json:"bindingTimeout,omitempty"`
	// Drivers: the drivers whose devices this profile allocates; the
	// devices of others are left to other schedulers, and a request whose
	// DeviceClass selects only another driver's devices is refused in
	// PreFilter. Set where another scheduler process allocates those
	// (gputopo's second-scheduler install). Default: empty, every
	// driver's devices.
	Drivers []string `json:"drivers,omitempty"`
}

// PolicyPart switches one criterion on or off and weighs it.
type PolicyPart struct {
	Enabled *bool    `json:"enabled,omitempty"`
	Weight  *float64 `json:"weight,omitempty"`
}

// TaskClass is one kind of request: GPUs whole GPUs, or a Share (0, 1] of
// one GPU, with its relative frequency Weight, and the CPU (millicores)
// and memory (MiB) its pods typically ask for besides; a node without
// them left strands its free GPUs for the class. 0: not counted.
type TaskClass struct {
	GPUs      int32   `json:"gpus"`
	Share     float64 `json:"share"`
	Weight    float64 `json:"weight"`
	CPUMilli  int64   `json:"cpuMilli,omitempty"`
	MemoryMiB int64   `json:"memoryMiB,omitempty"`
}
