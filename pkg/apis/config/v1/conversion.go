package v1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/apis/config"
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

// Convert turns defaulted versioned args into internal ones.
func Convert(v *GPUTopologyArgs) *config.GPUTopologyArgs {
	part := func(p *PolicyPart) config.PolicyPart {
		return config.PolicyPart{Enabled: ptr.Deref(p.Enabled, true), Weight: ptr.Deref(p.Weight, 1)}
	}
	out := &config.GPUTopologyArgs{
		Topology:       part(v.Topology),
		MIG:            part(v.MIG),
		Packing:        part(v.Packing),
		SearchBudget:   ptr.Deref(v.SearchBudget, DefaultSearchBudget),
		FilterTimeout:  *v.FilterTimeout,
		BindingTimeout: *v.BindingTimeout,
	}
	for _, c := range v.Workload {
		out.Workload = append(out.Workload, config.TaskClass{GPUs: c.GPUs, Share: c.Share, Weight: c.Weight, CPUMilli: c.CPUMilli, MemoryMiB: c.MemoryMiB})
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
	cp := func(p *PolicyPart) *PolicyPart {
		if p == nil {
			return nil
		}
		return &PolicyPart{Enabled: ptr.To(ptr.Deref(p.Enabled, false)), Weight: ptr.To(ptr.Deref(p.Weight, 0))}
	}
	if a.Topology != nil {
		out.Topology = cp(a.Topology)
	}
	if a.MIG != nil {
		out.MIG = cp(a.MIG)
	}
	if a.Packing != nil {
		out.Packing = cp(a.Packing)
	}
	out.Workload = append([]TaskClass(nil), a.Workload...)
	if a.SearchBudget != nil {
		out.SearchBudget = ptr.To(*a.SearchBudget)
	}
	if a.FilterTimeout != nil {
		d := *a.FilterTimeout
		out.FilterTimeout = &d
	}
	if a.BindingTimeout != nil {
		d := *a.BindingTimeout
		out.BindingTimeout = &d
	}
	return &out
}
