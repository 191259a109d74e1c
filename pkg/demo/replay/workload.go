// Package replay plays a workload through the schedulers: pods arrive and
// leave in steps, each scheduler on its own copy of the fleet, and what
// each placed is collected for the report.
package replay

import (
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/strictyaml"
)

// Workload is the workload file.
type Workload struct {
	// Steps the replay runs; pods arrive and leave at steps.
	Steps int `json:"steps"`
	// Templates are the claims pods ask for, by name.
	Templates map[string]ClaimTemplate `json:"templates"`
	Pods      []PodGroup               `json:"pods"`
}

// ClaimTemplate is one request of a ResourceClaimTemplate.
type ClaimTemplate struct {
	// Class is the DeviceClass: gpu.nvidia.com, mig.nvidia.com or
	// shared.gpu.nvidia.com.
	Class string `json:"class"`
	// Count of devices (default 1).
	Count int64 `json:"count,omitempty"`
	// Selector is a CEL expression on the device.
	Selector string `json:"selector,omitempty"`
	// Memory and Compute are capacity requests (shared GPUs).
	Memory  *resource.Quantity `json:"memory,omitempty"`
	Compute *resource.Quantity `json:"compute,omitempty"`
	// GPUs is what one pod counts toward the arrived workload, in GPUs
	// (default: Count); e.g. 0.25 for a quarter-GPU share.
	GPUs float64 `json:"gpus,omitempty"`
	// Kind labels the template in the report: "tensor-parallel", "MIG",
	// "shared", "article"... (default: the class).
	Kind string `json:"kind,omitempty"`
	// Resource makes the pods ask for Count of this extended resource in
	// resources.limits instead of a claim: nvidia.com/gpu (the class's
	// extendedResourceName, manifests/scheduler/extended-resource) or
	// deviceclass.resource.kubernetes.io/<class>. Only with class
	// gpu.nvidia.com and without selector, memory or compute.
	Resource string `json:"resource,omitempty"`
}

// ExtendedGPU is the extended resource the whole-GPU class serves.
const ExtendedGPU = contract.ExtendedResourceGPU

// implicitResource is the extended resource every class serves.
func implicitResource(class string) string { return "deviceclass.resource.kubernetes.io/" + class }

// PodGroup is Count pods of one template arriving (and maybe leaving)
// together.
type PodGroup struct {
	Name     string `json:"name"`
	Template string `json:"template"`
	Count    int    `json:"count"`
	Arrive   int    `json:"arrive"`
	// Leave is the step the pods leave at; 0 = they stay.
	Leave int `json:"leave,omitempty"`
	// Group makes the pods one PodGroup of the Workload API
	// (scheduling.k8s.io/v1beta1): a gang that starts whole, optionally
	// within one topology domain. The demo then runs its control plane
	// with the gates of manifests/pod-groups.
	Group *Gang `json:"group,omitempty"`
}

// Gang is the PodGroup of a pods entry.
type Gang struct {
	// MinCount of the pods must be placed together (default: count).
	MinCount int `json:"minCount,omitempty"`
	// Topology is a node label key whose value all the group's pods must
	// share: nvidia.com/gpu.clique for one NVLink clique. Empty: none.
	Topology string `json:"topology,omitempty"`
}

// HasGroups reports whether some pods form PodGroups.
func (w Workload) HasGroups() bool {
	for _, g := range w.Pods {
		if g.Group != nil {
			return true
		}
	}
	return false
}

// LoadWorkload reads and checks a workload file.
func LoadWorkload(path string) (Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, err
	}
	return ParseWorkload(data, path)
}

// Bounds of a workload file: the replay submits every pod through the
// API server and waits for each step's decisions, so a mistyped count
// would run for days instead of failing.
const (
	MaxSteps = 1000
	MaxPods  = 20000
)

// ParseWorkload checks a workload; errors name the field.
func ParseWorkload(data []byte, source string) (Workload, error) {
	var w Workload
	if err := strictyaml.Unmarshal(data, &w); err != nil {
		return w, fmt.Errorf("%s: %w", source, err)
	}
	var errs field.ErrorList
	stepsValid := w.Steps >= 1 && w.Steps <= MaxSteps
	if !stepsValid {
		errs = append(errs, field.Invalid(field.NewPath("steps"), w.Steps, fmt.Sprintf("must be in 1..%d", MaxSteps)))
	}
	for name, t := range w.Templates {
		p := field.NewPath("templates").Key(name)
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p, name, "the claim template's name: "+msg))
		}
		switch t.Class {
		case contract.ClassGPU, contract.ClassMIG, contract.ClassSharedGPU:
		default:
			errs = append(errs, field.NotSupported(p.Child("class"), t.Class, []string{contract.ClassGPU, contract.ClassMIG, contract.ClassSharedGPU}))
		}
		if t.Count < 0 || t.Count > resourceapi.AllocationResultsMaxSize {
			errs = append(errs, field.Invalid(p.Child("count"), t.Count, fmt.Sprintf("must be in 0..%d, the devices one claim may hold (0: 1)", resourceapi.AllocationResultsMaxSize)))
		}
		if t.Selector != "" {
			if c := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true}).CompileCELExpression(t.Selector, dracel.Options{}); c.Error != nil {
				errs = append(errs, field.Invalid(p.Child("selector"), t.Selector, c.Error.Error()))
			}
		}
		for what, q := range map[string]*resource.Quantity{"memory": t.Memory, "compute": t.Compute} {
			if q != nil && q.Sign() <= 0 {
				errs = append(errs, field.Invalid(p.Child(what), q.String(), "must be positive"))
			}
		}
		if t.Class == contract.ClassSharedGPU && t.Compute != nil && t.Compute.Cmp(*resource.NewQuantity(contract.SharedComputePercent, resource.DecimalSI)) > 0 {
			errs = append(errs, field.Invalid(p.Child("compute"), t.Compute.String(), fmt.Sprintf("must be at most %d, a shared GPU's compute (percent of its SMs)", contract.SharedComputePercent)))
		}
		if count := max(t.Count, 1); t.GPUs < 0 || t.GPUs > float64(count) {
			errs = append(errs, field.Invalid(p.Child("gpus"), t.GPUs, fmt.Sprintf("must be in 0..%d, the devices the claim holds (0: count)", count)))
		}
		if t.Resource != "" {
			switch {
			case t.Resource != ExtendedGPU && t.Resource != implicitResource(t.Class):
				errs = append(errs, field.NotSupported(p.Child("resource"), t.Resource, []string{ExtendedGPU, implicitResource(t.Class)}))
			case t.Class != contract.ClassGPU && t.Resource == ExtendedGPU:
				errs = append(errs, field.Invalid(p.Child("resource"), t.Resource, "only class "+contract.ClassGPU+" serves it"))
			case t.Selector != "" || t.Memory != nil || t.Compute != nil:
				errs = append(errs, field.Forbidden(p.Child("resource"), "a pod asking for an extended resource has no selector, memory or compute"))
			}
		}
	}
	if len(w.Pods) == 0 {
		errs = append(errs, field.Required(field.NewPath("pods"), "a workload needs at least one pod"))
	}
	seen := map[string]bool{}
	total := 0
	for i, g := range w.Pods {
		p := field.NewPath("pods").Index(i)
		total += max(g.Count, 0)
		if g.Name == "" || seen[g.Name] {
			errs = append(errs, field.Invalid(p.Child("name"), g.Name, "must be set and unique"))
		} else {
			// Pods are <name>-<k>, a name that is also a label value.
			for _, msg := range validation.IsDNS1123Label(fmt.Sprintf("%s-%d", g.Name, max(g.Count-1, 0))) {
				errs = append(errs, field.Invalid(p.Child("name"), g.Name, "its pods' names: "+msg))
			}
		}
		seen[g.Name] = true
		if _, ok := w.Templates[g.Template]; !ok {
			errs = append(errs, field.NotFound(p.Child("template"), g.Template))
		}
		if g.Count < 1 || g.Count > MaxPods {
			errs = append(errs, field.Invalid(p.Child("count"), g.Count, fmt.Sprintf("must be in 1..%d", MaxPods)))
		}
		// arrive and leave are judged against a valid steps only.
		if stepsValid {
			errs = append(errs, stepErrors(p, g, w.Steps)...)
		}
		if gang := g.Group; gang != nil {
			if gang.MinCount < 0 || gang.MinCount > g.Count {
				errs = append(errs, field.Invalid(p.Child("group", "minCount"), gang.MinCount, fmt.Sprintf("must be in 1..count (%d); 0 means count", g.Count)))
			}
			for _, msg := range validation.IsQualifiedName(gang.Topology) {
				if gang.Topology != "" {
					errs = append(errs, field.Invalid(p.Child("group", "topology"), gang.Topology, msg))
				}
			}
		}
	}
	if total > MaxPods {
		errs = append(errs, field.Invalid(field.NewPath("pods"), total, fmt.Sprintf("%d pods in all; at most %d", total, MaxPods)))
	}
	if err := errs.ToAggregate(); err != nil {
		return w, fmt.Errorf("%s: %w", source, err)
	}
	for i := range w.Pods {
		if gang := w.Pods[i].Group; gang != nil && gang.MinCount == 0 {
			gang.MinCount = w.Pods[i].Count
		}
	}
	for name, t := range w.Templates {
		if t.Count == 0 {
			t.Count = 1
		}
		if t.GPUs == 0 {
			t.GPUs = float64(t.Count)
		}
		if t.Kind == "" {
			t.Kind = t.Class
		}
		w.Templates[name] = t
	}
	return w, nil
}

// stepErrors judges the pods' arrive and leave steps against steps.
func stepErrors(p *field.Path, g PodGroup, steps int) field.ErrorList {
	var errs field.ErrorList
	if g.Arrive < 0 || g.Arrive >= steps {
		errs = append(errs, field.Invalid(p.Child("arrive"), g.Arrive, fmt.Sprintf("must be a step in 0..%d", steps-1)))
	}
	if g.Leave != 0 && (g.Leave <= g.Arrive || g.Leave >= steps) {
		msg := fmt.Sprintf("must be a step after arrive, in %d..%d (0: the pods stay)", g.Arrive+1, steps-1)
		if g.Arrive+1 >= steps {
			msg = "must be 0: the pods arrive at the last step"
		}
		errs = append(errs, field.Invalid(p.Child("leave"), g.Leave, msg))
	}
	return errs
}
