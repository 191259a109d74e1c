package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Defaults of the arguments.
const (
	DefaultSearchBudget   = 20000
	DefaultFilterTimeout  = 10 * time.Second
	DefaultBindingTimeout = 10 * time.Minute
)

// SetDefaults fills every unset field.
func SetDefaults(a *GPUTopologyArgs) {
	for _, p := range []**PolicyPart{&a.Topology, &a.MIG, &a.Packing} {
		if *p == nil {
			*p = &PolicyPart{}
		}
		if (*p).Enabled == nil {
			(*p).Enabled = ptr.To(true)
		}
		if (*p).Weight == nil {
			(*p).Weight = ptr.To(1.0)
		}
	}
	if a.Workload == nil {
		for _, c := range topology.DefaultWorkload() {
			a.Workload = append(a.Workload, TaskClass{GPUs: int32(c.GPUs), Share: c.Share, Weight: c.Weight, CPUMilli: c.CPUMilli, MemoryMiB: c.MemoryMiB})
		}
	}
	if a.SearchBudget == nil {
		a.SearchBudget = ptr.To[int32](DefaultSearchBudget)
	}
	if a.FilterTimeout == nil {
		a.FilterTimeout = &metav1.Duration{Duration: DefaultFilterTimeout}
	}
	if a.BindingTimeout == nil {
		a.BindingTimeout = &metav1.Duration{Duration: DefaultBindingTimeout}
	}
}
