package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/allocator"
)

// Defaults of the arguments that are not the engine's: the policy's
// defaults are allocator.DefaultPolicy's.
const (
	DefaultFilterTimeout  = 10 * time.Second
	DefaultBindingTimeout = 10 * time.Minute
)

// SetDefaults fills every unset field.
func SetDefaults(a *GPUTopologyArgs) {
	d := allocator.DefaultPolicy()
	for _, p := range []struct {
		part **PolicyPart
		def  allocator.PolicyPart
	}{{&a.Topology, d.Topology}, {&a.MIG, d.MIG}, {&a.Packing, d.Packing}} {
		if *p.part == nil {
			*p.part = &PolicyPart{}
		}
		if (*p.part).Enabled == nil {
			(*p.part).Enabled = ptr.To(p.def.Enabled)
		}
		if (*p.part).Weight == nil {
			(*p.part).Weight = ptr.To(p.def.Weight)
		}
	}
	if a.Workload == nil {
		for _, c := range d.Workload {
			a.Workload = append(a.Workload, TaskClass{GPUs: int32(c.GPUs), Share: c.Share, Weight: c.Weight, CPUMilli: c.CPUMilli, MemoryMiB: c.MemoryMiB})
		}
	}
	if a.HostPressure == nil {
		a.HostPressure = ptr.To(d.HostPressure)
	}
	if a.LinkClassCost == nil {
		a.LinkClassCost = ptr.To(d.LinkClassCost)
	}
	if a.SearchBudget == nil {
		a.SearchBudget = ptr.To(int32(d.SearchBudget))
	}
	if a.FilterTimeout == nil {
		a.FilterTimeout = &metav1.Duration{Duration: DefaultFilterTimeout}
	}
	if a.BindingTimeout == nil {
		a.BindingTimeout = &metav1.Duration{Duration: DefaultBindingTimeout}
	}
}
