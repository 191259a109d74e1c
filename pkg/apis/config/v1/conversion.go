package v1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Decode turns the args the scheduler framework hands a plugin (nil, raw
// JSON or YAML in a runtime.Unknown, or an already typed value) into
// defaulted internal args. Unknown fields are an error naming the field,
// so that a typo stops the scheduler instead of being ignored.
func Decode(obj runtime.Object) (*config.GPUTopologyArgs, error) {
	v := &GPUTopologyArgs{}
	switch o := obj.(type) {
	case nil:
	case *GPUTopologyArgs:
		v = o.DeepCopy()
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			raw, err := yaml.YAMLToJSON(o.Raw)
			if err != nil {
				return nil, fmt.Errorf("GPUTopologyArgs: %w", err)
			}
			if err := yaml.UnmarshalStrict(raw, v); err != nil {
				return nil, fmt.Errorf("GPUTopologyArgs: %w", err)
			}
		}
	default:
		// Some callers pass args decoded into another type; go through JSON.
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("GPUTopologyArgs: got %T: %w", obj, err)
		}
		if err := yaml.UnmarshalStrict(raw, v); err != nil {
			return nil, fmt.Errorf("GPUTopologyArgs: got %T: %w", obj, err)
		}
	}
	if v.APIVersion != "" && v.APIVersion != Group+"/"+Version {
		return nil, fmt.Errorf("GPUTopologyArgs: apiVersion: unsupported value %q, want %q", v.APIVersion, Group+"/"+Version)
	}
	if v.Kind != "" && v.Kind != Kind {
		return nil, fmt.Errorf("GPUTopologyArgs: kind: unsupported value %q, want %q", v.Kind, Kind)
	}
	SetDefaults(v)
	return Convert(v), nil
}

// Convert turns defaulted versioned args (SetDefaults has run) into
// internal ones.
func Convert(v *GPUTopologyArgs) *config.GPUTopologyArgs {
	part := func(p *PolicyPart) allocator.PolicyPart {
		return allocator.PolicyPart{Enabled: *p.Enabled, Weight: *p.Weight}
	}
	out := &config.GPUTopologyArgs{
		Topology:       part(v.Topology),
		MIG:            part(v.MIG),
		Packing:        part(v.Packing),
		HostPressure:   *v.HostPressure,
		LinkClassCost:  *v.LinkClassCost,
		SearchBudget:   *v.SearchBudget,
		FilterTimeout:  *v.FilterTimeout,
		BindingTimeout: *v.BindingTimeout,
	}
	for _, c := range v.Workload {
		out.Workload = append(out.Workload, topology.TaskClass{GPUs: int(c.GPUs), Share: c.Share, Weight: c.Weight, CPUMilli: c.CPUMilli, MemoryMiB: c.MemoryMiB})
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (a *GPUTopologyArgs) DeepCopyObject() runtime.Object { return a.DeepCopy() }

// DeepCopy copies the args.
func (a *GPUTopologyArgs) DeepCopy() *GPUTopologyArgs {
	if a == nil {
		return nil
	}
	out := *a
	out.Topology = a.Topology.DeepCopy()
	out.MIG = a.MIG.DeepCopy()
	out.Packing = a.Packing.DeepCopy()
	if a.Workload != nil {
		out.Workload = append([]TaskClass(nil), a.Workload...)
	}
	out.HostPressure = copyPtr(a.HostPressure)
	out.LinkClassCost = copyPtr(a.LinkClassCost)
	out.SearchBudget = copyPtr(a.SearchBudget)
	out.FilterTimeout = copyPtr(a.FilterTimeout)
	out.BindingTimeout = copyPtr(a.BindingTimeout)
	return &out
}

// DeepCopy copies the part; a field left unset stays unset, so that
// defaulting after a copy gives what it gives on the original.
func (p *PolicyPart) DeepCopy() *PolicyPart {
	if p == nil {
		return nil
	}
	return &PolicyPart{Enabled: copyPtr(p.Enabled), Weight: copyPtr(p.Weight)}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
