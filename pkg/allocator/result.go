package allocator

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
)

// build turns a solution into one AllocationResult per claim, filled in
// the way upstream fills it: results in allocation order, class configs
// once per class, claim configs for the requests they name, and a node
// selector that pins node-local devices to the node.
func (r *run) build(sol *solution) ([]resourceapi.AllocationResult, error) {
	out := make([]resourceapi.AllocationResult, len(r.s.plans))
	for ci := range r.s.plans {
		plan := &r.s.plans[ci]
		res := &out[ci]
		res.Devices.Results = make([]resourceapi.DeviceRequestAllocationResult, len(sol.picks[ci]))
		for i, pk := range sol.picks[ci] {
			dv := r.view.devices[pk.dev]
			dr := resourceapi.DeviceRequestAllocationResult{
				Request:     pk.q.name,
				Driver:      dv.slice.Spec.Driver,
				Pool:        dv.slice.Spec.Pool.Name,
				Device:      dv.api.Name,
				Tolerations: pk.q.tolerate,
			}
			if pk.shared {
				dr.ShareID = ptr.To(uuid.NewUUID())
			}
			if pk.q.admin {
				dr.AdminAccess = ptr.To(true)
			}
			if len(pk.consumed) > 0 {
				dr.ConsumedCapacity = make(map[resourceapi.QualifiedName]resource.Quantity, len(pk.consumed))
				for k, v := range pk.consumed {
					dr.ConsumedCapacity[k] = v.DeepCopy()
				}
			}
			if r.f.DeviceBindingAndStatus {
				dr.BindingConditions = dv.api.BindingConditions
				dr.BindingFailureConditions = dv.api.BindingFailureConditions
			}
			res.Devices.Results[i] = dr
		}
		res.Devices.Config = configsFor(plan, sol.subs[ci])
		ns, err := r.nodeSelector(sol.picks[ci])
		if err != nil {
			return nil, fmt.Errorf("create NodeSelector for claim %s: %w", plan.claim.Name, err)
		}
		res.NodeSelector = ns
	}
	return out, nil
}

// configsFor collects class configs (each class once, naming every request
// that uses it) and the claim's own configs that apply to the chosen
// requests; a config that covers every request gets an empty list, which
// means "all".
func configsFor(plan *claimPlan, subs []int) []resourceapi.DeviceAllocationConfiguration {
	var cfg []resourceapi.DeviceAllocationConfiguration
	chosen := func(g int) *req { return plan.groups[g].alts[subs[g]] }
	type span struct{ start, end int }
	byClass := make(map[string]span)
	for g := range plan.groups {
		q := chosen(g)
		if sp, ok := byClass[q.class.Name]; ok {
			for i := sp.start; i < sp.end; i++ {
				cfg[i].Requests = append(cfg[i].Requests, q.name)
			}
			continue
		}
		start := len(cfg)
		for _, c := range q.class.Spec.Config {
			cfg = append(cfg, resourceapi.DeviceAllocationConfiguration{
				Source:              resourceapi.AllocationConfigSourceClass,
				Requests:            []string{q.name},
				DeviceConfiguration: c.DeviceConfiguration,
			})
		}
		byClass[q.class.Name] = span{start, len(cfg)}
	}
	named := func(names []string, g int) bool {
		q := chosen(g)
		return slices.Contains(names, q.base) || (q.subName != "" && slices.Contains(names, q.name))
	}
	for _, c := range plan.claim.Spec.Devices.Config {
		applies := len(c.Requests) == 0
		for g := 0; !applies && g < len(plan.groups); g++ {
			applies = named(c.Requests, g)
		}
		if applies {
			cfg = append(cfg, resourceapi.DeviceAllocationConfiguration{
				Source:              resourceapi.AllocationConfigSourceClaim,
				Requests:            slices.Clone(c.Requests),
				DeviceConfiguration: c.DeviceConfiguration,
			})
		}
	}
	for i := range cfg {
		if len(cfg[i].Requests) == 0 {
			continue
		}
		all := true
		for g := range plan.groups {
			if !named(cfg[i].Requests, g) {
				all = false
				break
			}
		}
		if all {
			cfg[i].Requests = nil
		}
	}
	return cfg
}

// nodeSelector pins the allocation to the node when any device is local to
// it (or binds to it); otherwise it merges the single-term selectors of
// network-attached devices, and returns nil for devices usable anywhere.
func (r *run) nodeSelector(picks []pick) (*v1.NodeSelector, error) {
	term := v1.NodeSelectorTerm{}
	for _, pk := range picks {
		dv := r.view.devices[pk.dev]
		nodeName, sel := dv.slice.Spec.NodeName, dv.slice.Spec.NodeSelector
		if ptr.Deref(dv.slice.Spec.PerDeviceNodeSelection, false) {
			nodeName, sel = dv.api.NodeName, dv.api.NodeSelector
		}
		if nodeName != nil || (!r.s.legacy && ptr.Deref(dv.api.BindsToNode, false)) {
			return &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchFields: []v1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{r.node.Name},
				}},
			}}}, nil
		}
		if sel == nil {
			continue
		}
		switch len(sel.NodeSelectorTerms) {
		case 0:
		case 1:
			term.MatchFields = mergeRequirements(term.MatchFields, sel.NodeSelectorTerms[0].MatchFields)
			term.MatchExpressions = mergeRequirements(term.MatchExpressions, sel.NodeSelectorTerms[0].MatchExpressions)
		default:
			field := "spec.nodeSelector"
			if ptr.Deref(dv.slice.Spec.PerDeviceNodeSelection, false) {
				field = "device " + dv.api.Name + ": nodeSelector"
			}
			return nil, fmt.Errorf("ResourceSlice %s: %s: unsupported node selector with %d terms", dv.slice.Name, field, len(sel.NodeSelectorTerms))
		}
	}
	if len(term.MatchFields) == 0 && len(term.MatchExpressions) == 0 {
		return nil, nil
	}
	return &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{term}}, nil
}

// selectorsBuild reports the error building the current solution's node
// selectors would give: only devices with several-term selectors can
// cause one (API validation allows those in per-device node selection,
// and upstream's allocator cannot merge them into one term).
//
// Upstream fails when the first solution it finds gives such an error,
// and returns that solution otherwise. So the engine fails exactly when
// its first solution, upstream's, does, and otherwise keeps only
// solutions that build: the outcome does not depend on which devices the
// policy prefers.
func (r *run) selectorsBuild() error {
	for ci := range r.s.plans {
		if _, err := r.nodeSelector(r.picks[ci]); err != nil {
			return fmt.Errorf("create NodeSelector for claim %s: %w", r.s.plans[ci].claim.Name, err)
		}
	}
	return nil
}

// multiTermSelectors reports whether a device, or its slice, has a node
// selector with more than one term.
func multiTermSelectors(devices []*device) bool {
	for _, d := range devices {
		sel := d.slice.Spec.NodeSelector
		if ptr.Deref(d.slice.Spec.PerDeviceNodeSelection, false) {
			sel = d.api.NodeSelector
		}
		if sel != nil && len(sel.NodeSelectorTerms) > 1 {
			return true
		}
	}
	return false
}

func mergeRequirements(into, from []v1.NodeSelectorRequirement) []v1.NodeSelectorRequirement {
	for _, req := range from {
		dup := slices.ContainsFunc(into, func(have v1.NodeSelectorRequirement) bool {
			return have.Key == req.Key && have.Operator == req.Operator && sameSet(have.Values, req.Values)
		})
		if !dup {
			into = append(into, req)
		}
	}
	return into
}

func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
