package v1

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/strictyaml"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Decode turns the args the scheduler framework hands a plugin (nil, raw
// JSON or YAML in a runtime.Unknown, or an already typed value) into
// defaulted internal args. Unknown fields are an error naming the field,
// so that a typo stops the scheduler instead of being ignored.
func Decode(obj runtime.Object) (*config.GPUTopologyArgs, error) {
	v := &GPUTopologyArgs{}
	if o, ok := obj.(*GPUTopologyArgs); ok {
		v = o.DeepCopy()
	} else if err := decodeStrict(obj, v, Kind); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(v.TypeMeta, Kind); err != nil {
		return nil, err
	}
	SetDefaults(v)
	return Convert(v), nil
}

// decodeStrict fills v from args in a runtime.Unknown (JSON or YAML) or
// of another type (through JSON); unknown fields are an error.
func decodeStrict(obj runtime.Object, v any, kind string) error {
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			if err := strictyaml.Unmarshal(o.Raw, v); err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
		}
	default:
		// Some callers pass args decoded into another type; go through JSON.
		raw, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s: got %T: %w", kind, obj, err)
		}
		if err := strictyaml.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%s: got %T: %w", kind, obj, err)
		}
	}
	return nil
}

// checkTypeMeta accepts args without apiVersion and kind, or with ours.
func checkTypeMeta(tm metav1.TypeMeta, kind string) error {
	if tm.APIVersion != "" && tm.APIVersion != Group+"/"+Version {
		return fmt.Errorf("%s: apiVersion: unsupported value %q, want %q", kind, tm.APIVersion, Group+"/"+Version)
	}
	if tm.Kind != "" && tm.Kind != kind {
		return fmt.Errorf("%s: kind: unsupported value %q, want %q", kind, tm.Kind, kind)
	}
	return nil
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
		Drivers:        slices.Clone(v.Drivers),
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
	out.Drivers = slices.Clone(a.Drivers)
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
