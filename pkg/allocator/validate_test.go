package allocator

import (
	"context"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// validate re-checks allocation results against the problem, independently
// of the engine's search: device visibility, selectors, counts, exclusive
// use, counters, capacity and request policies, constraints, taints. It is
// run on upstream's results too, so that it is known to accept them.
func validate(p *problem, results []resourceapi.AllocationResult) error {
	if len(results) != len(p.claims) {
		return fmt.Errorf("got %d results for %d claims", len(results), len(p.claims))
	}
	v := newVisibility(p)
	celCache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: p.features.ConsumableCapacity})
	exclusive := map[structured.DeviceID]string{}
	newShares := map[structured.DeviceID][]map[resourceapi.QualifiedName]resource.Quantity{}
	touched := map[string]bool{} // pools with new counter consumption
	newlyHeld := map[structured.DeviceID]bool{}
	for ci, claim := range p.claims {
		res := results[ci]
		adminSeen := map[structured.DeviceID]bool{}
		perGroup := map[string][]resourceapi.DeviceRequestAllocationResult{}
		for _, r := range res.Devices.Results {
			base, _, _ := strings.Cut(r.Request, "/")
			perGroup[base] = append(perGroup[base], r)
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			vd, ok := v.devices[id]
			if !ok {
				return fmt.Errorf("claim %s: device %s is not visible to node %s", claim.Name, id, p.node.Name)
			}
			spec, err := requestSpec(claim, r.Request)
			if err != nil {
				return err
			}
			class, err := p.classes.Get(spec.className)
			if err != nil {
				return fmt.Errorf("claim %s: %w", claim.Name, err)
			}
			if !p.features.DeviceBindingAndStatus && len(vd.dev.BindingConditions) > 0 {
				return fmt.Errorf("claim %s: device %s has binding conditions, feature off", claim.Name, id)
			}
			for _, sel := range append(append([]resourceapi.DeviceSelector{}, class.Spec.Selectors...), spec.selectors...) {
				expr := celCache.GetOrCompile(sel.CEL.Expression)
				if expr.Error != nil {
					return fmt.Errorf("claim %s: selector %q does not compile", claim.Name, sel.CEL.Expression)
				}
				m, _, err := expr.DeviceMatches(context.Background(), cel.Device{Driver: r.Driver, AllowMultipleAllocations: vd.dev.AllowMultipleAllocations, Attributes: vd.dev.Attributes, Capacity: vd.dev.Capacity})
				if err != nil || !m {
					return fmt.Errorf("claim %s, request %s: device %s does not match %q (err %v)", claim.Name, r.Request, id, sel.CEL.Expression, err)
				}
			}
			if p.features.DeviceTaints {
				for _, t := range vd.dev.Taints {
					if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
						continue
					}
					ok := false
					for _, tol := range spec.tolerations {
						ok = ok || resourceclaim.ToleratesTaint(tol, t)
					}
					if !ok {
						return fmt.Errorf("claim %s: device %s has an untolerated taint %s", claim.Name, id, t.Key)
					}
				}
			}
			admin := ptr.Deref(r.AdminAccess, false)
			if admin != ptr.Deref(spec.adminAccess, false) {
				return fmt.Errorf("claim %s: device %s admin access %v, request says %v", claim.Name, id, admin, spec.adminAccess)
			}
			multi := p.features.ConsumableCapacity && ptr.Deref(vd.dev.AllowMultipleAllocations, false)
			if admin && !multi {
				if adminSeen[id] {
					return fmt.Errorf("claim %s: device %s twice with admin access", claim.Name, id)
				}
				adminSeen[id] = true
			}
			if admin {
				continue
			}
			if multi {
				if r.ShareID == nil {
					return fmt.Errorf("claim %s: shared device %s without share ID", claim.Name, id)
				}
				if err := checkConsumed(spec.capacity, vd.dev.Capacity, r.ConsumedCapacity); err != nil {
					return fmt.Errorf("claim %s: device %s: %w", claim.Name, id, err)
				}
				if !held(p, id) && !newlyHeld[id] && len(vd.dev.ConsumesCounters) > 0 {
					touched[vd.poolKey] = true
				}
				newShares[id] = append(newShares[id], r.ConsumedCapacity)
				newlyHeld[id] = true
				continue
			}
			// Shares in the ledger only block devices that are shared
			// (the scheduler folds them into AllocatedDevices otherwise).
			if p.state.AllocatedDevices.Has(id) {
				return fmt.Errorf("claim %s: device %s is already allocated", claim.Name, id)
			}
			if other, dup := exclusive[id]; dup {
				return fmt.Errorf("claim %s: device %s also allocated to %s", claim.Name, id, other)
			}
			if len(vd.dev.ConsumesCounters) > 0 {
				touched[vd.poolKey] = true
			}
			exclusive[id] = claim.Name
			newlyHeld[id] = true
		}
		if err := checkGroups(claim, perGroup); err != nil {
			return err
		}
		if err := checkConstraints(claim, res.Devices.Results, v); err != nil {
			return err
		}
	}
	for id, shares := range newShares {
		if _, dup := exclusive[id]; dup {
			return fmt.Errorf("device %s shared and exclusive", id)
		}
		for name, c := range v.devices[id].dev.Capacity {
			total := resource.Quantity{}
			if h := p.state.AggregatedCapacity[id][name]; h != nil {
				total.Add(*h)
			}
			for _, s := range shares {
				q := s[name]
				total.Add(q)
			}
			if total.Cmp(c.Value) > 0 {
				return fmt.Errorf("device %s: capacity %s overcommitted: %s > %s", id, name, total.String(), c.Value.String())
			}
		}
	}
	return v.checkCounters(p, newlyHeld, touched)
}

// held: the device consumes counters because of the ledger. Upstream's
// stable allocator reads only AllocatedDevices (it knows no shares).
func held(p *problem, id structured.DeviceID) bool {
	s := p.state
	if s.AllocatedDevices.Has(id) {
		return true
	}
	if isLegacy(p.features) {
		return false
	}
	for sid := range s.AllocatedSharedDeviceIDs {
		if sid.GetDeviceID() == id {
			return true
		}
	}
	_, ok := s.AggregatedCapacity[id]
	return ok
}

// checkConsumed: a share consumes at least what was asked, and a value the
// device's request policy allows.
func checkConsumed(req *resourceapi.CapacityRequirements, caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, got map[resourceapi.QualifiedName]resource.Quantity) error {
	for name, c := range caps {
		v, ok := got[name]
		if !ok {
			if len(got) == 0 && len(caps) > 0 {
				// Nothing recorded: only possible when everything is zero.
				continue
			}
			return fmt.Errorf("capacity %s: no consumed value recorded", name)
		}
		if req != nil {
			if asked, ok := req.Requests[name]; ok && v.Cmp(asked) < 0 {
				return fmt.Errorf("capacity %s: consumed %s < requested %s", name, v.String(), asked.String())
			}
		}
		pol := c.RequestPolicy
		if pol == nil {
			continue
		}
		if pol.Default != nil && v.Cmp(*pol.Default) == 0 {
			continue
		}
		if len(pol.ValidValues) > 0 {
			found := false
			for _, vv := range pol.ValidValues {
				found = found || vv.Cmp(v) == 0
			}
			if !found {
				return fmt.Errorf("capacity %s: %s not a valid value", name, v.String())
			}
		}
		if r := pol.ValidRange; r != nil {
			if r.Min != nil && v.Cmp(*r.Min) < 0 || r.Max != nil && v.Cmp(*r.Max) > 0 {
				return fmt.Errorf("capacity %s: %s out of range", name, v.String())
			}
			if r.Step != nil && r.Min != nil {
				diff := v.DeepCopy()
				diff.Sub(*r.Min)
				steps := diff.AsApproximateFloat64() / r.Step.AsApproximateFloat64()
				if d := steps - float64(int64(steps+0.5)); d > 1e-6 || d < -1e-6 {
					return fmt.Errorf("capacity %s: %s not on a step", name, v.String())
				}
			}
		}
	}
	return nil
}

func checkGroups(claim *resourceapi.ResourceClaim, perGroup map[string][]resourceapi.DeviceRequestAllocationResult) error {
	for _, r := range claim.Spec.Devices.Requests {
		got := perGroup[r.Name]
		if len(r.FirstAvailable) > 0 {
			if len(got) == 0 {
				return fmt.Errorf("claim %s, request %s: nothing allocated", claim.Name, r.Name)
			}
			alt := got[0].Request
			for _, g := range got {
				if g.Request != alt {
					return fmt.Errorf("claim %s, request %s: mixes alternatives %s and %s", claim.Name, r.Name, alt, g.Request)
				}
			}
			for _, s := range r.FirstAvailable {
				if r.Name+"/"+s.Name == alt && s.AllocationMode != resourceapi.DeviceAllocationModeAll && int64(len(got)) != s.Count {
					return fmt.Errorf("claim %s, request %s: %d devices, want %d", claim.Name, alt, len(got), s.Count)
				}
			}
			continue
		}
		switch r.Exactly.AllocationMode {
		case resourceapi.DeviceAllocationModeExactCount:
			if int64(len(got)) != r.Exactly.Count {
				return fmt.Errorf("claim %s, request %s: %d devices, want %d", claim.Name, r.Name, len(got), r.Exactly.Count)
			}
		case resourceapi.DeviceAllocationModeAll:
			if len(got) == 0 {
				return fmt.Errorf("claim %s, request %s: mode All got nothing", claim.Name, r.Name)
			}
		}
		for _, g := range got {
			if g.Request != r.Name {
				return fmt.Errorf("claim %s: result names request %s", claim.Name, g.Request)
			}
		}
	}
	return nil
}

func checkConstraints(claim *resourceapi.ResourceClaim, results []resourceapi.DeviceRequestAllocationResult, v *visibility) error {
	for _, c := range claim.Spec.Devices.Constraints {
		var vals []*resourceapi.DeviceAttribute
		for _, r := range results {
			base, _, _ := strings.Cut(r.Request, "/")
			if len(c.Requests) > 0 && !contains(c.Requests, base) && !contains(c.Requests, r.Request) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			name := c.MatchAttribute
			if name == nil {
				name = c.DistinctAttribute
			}
			a := lookupAttr(v.devices[id].dev, r.Driver, string(*name))
			if a == nil {
				return fmt.Errorf("claim %s: device %s lacks constrained attribute %s", claim.Name, id, *name)
			}
			vals = append(vals, a)
		}
		for i := range vals {
			for j := i + 1; j < len(vals); j++ {
				eq := fmt.Sprint(attrValue(vals[i])) == fmt.Sprint(attrValue(vals[j]))
				if c.MatchAttribute != nil && !eq {
					return fmt.Errorf("claim %s: matchAttribute %s violated", claim.Name, *c.MatchAttribute)
				}
				if c.DistinctAttribute != nil && eq {
					return fmt.Errorf("claim %s: distinctAttribute %s violated", claim.Name, *c.DistinctAttribute)
				}
			}
		}
	}
	return nil
}

func attrValue(a *resourceapi.DeviceAttribute) any {
	switch {
	case a.StringValue != nil:
		return "s:" + *a.StringValue
	case a.IntValue != nil:
		return *a.IntValue
	case a.BoolValue != nil:
		return *a.BoolValue
	case a.VersionValue != nil:
		return "v:" + *a.VersionValue
	}
	return nil
}

func lookupAttr(d *resourceapi.Device, driver, name string) *resourceapi.DeviceAttribute {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
		return &a
	}
	if dom, id, ok := strings.Cut(name, "/"); ok && dom == driver {
		if a, ok := d.Attributes[resourceapi.QualifiedName(id)]; ok {
			return &a
		}
	}
	return nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

type specView struct {
	className   string
	selectors   []resourceapi.DeviceSelector
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements
	adminAccess *bool
}

func requestSpec(claim *resourceapi.ResourceClaim, name string) (specView, error) {
	base, sub, _ := strings.Cut(name, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != base {
			continue
		}
		if sub == "" && r.Exactly != nil {
			e := r.Exactly
			return specView{e.DeviceClassName, e.Selectors, e.Tolerations, e.Capacity, e.AdminAccess}, nil
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return specView{s.DeviceClassName, s.Selectors, s.Tolerations, s.Capacity, nil}, nil
			}
		}
	}
	return specView{}, fmt.Errorf("claim %s: result names unknown request %s", claim.Name, name)
}

// visibility lists the devices a node may use: from slices that select the
// node, in the newest generation of a complete and valid pool.
type visibility struct {
	devices map[structured.DeviceID]visDevice
	pools   map[string]*visPool
}

type visDevice struct {
	dev     *resourceapi.Device
	poolKey string
}

type visPool struct {
	counters map[string]map[string]resource.Quantity
	slices   []*resourceapi.ResourceSlice // all slices of the generation
}

// newVisibility follows upstream's choice of a pool's slices for a node:
// the newest generation among the slices that select the node; if those
// alone are not the whole pool, every slice of that generation, unless a
// newer generation exists elsewhere (the pool is being replaced and is
// ignored). So an older generation that alone selects the node is used.
func newVisibility(p *problem) *visibility {
	v := &visibility{devices: map[structured.DeviceID]visDevice{}, pools: map[string]*visPool{}}
	var counted []*resourceapi.ResourceSlice
	for _, s := range p.slices {
		if !p.features.CompatibilityGroups && topology.UsesCompatibilityGroups(s) {
			continue // ignored, so the pool is incomplete if it counts the slice
		}
		counted = append(counted, s)
	}
	relevant := map[string][]*resourceapi.ResourceSlice{} // newest generation only
	for _, s := range counted {
		if !selectsNode(p, s) {
			continue
		}
		k := poolKeyOf(s)
		if cur := relevant[k]; len(cur) > 0 && cur[0].Spec.Pool.Generation > s.Spec.Pool.Generation {
			continue
		} else if len(cur) > 0 && cur[0].Spec.Pool.Generation < s.Spec.Pool.Generation {
			relevant[k] = nil
		}
		relevant[k] = append(relevant[k], s)
	}
	for k, rel := range relevant {
		gen, count := rel[0].Spec.Pool.Generation, rel[0].Spec.Pool.ResourceSliceCount
		slices := rel
		if int64(len(rel)) != count {
			slices = nil
			obsolete := false
			for _, s := range p.slices { // all, as upstream looks for a newer generation
				if poolKeyOf(s) != k {
					continue
				}
				obsolete = obsolete || s.Spec.Pool.Generation > gen
			}
			for _, s := range counted {
				if poolKeyOf(s) == k && s.Spec.Pool.Generation == gen {
					slices = append(slices, s)
				}
			}
			if obsolete || int64(len(slices)) != count {
				continue
			}
		}
		vp := &visPool{counters: map[string]map[string]resource.Quantity{}, slices: slices}
		for _, s := range slices {
			for _, cs := range s.Spec.SharedCounters {
				m := map[string]resource.Quantity{}
				for n, c := range cs.Counters {
					m[n] = c.Value
				}
				vp.counters[cs.Name] = m
			}
		}
		if !p.features.PartitionableDevices && len(vp.counters) > 0 {
			continue
		}
		v.pools[k] = vp
		for _, s := range rel {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
					if ok, _ := nodeMatches(p.node, ptr.Deref(d.NodeName, ""), ptr.Deref(d.AllNodes, false), d.NodeSelector); !ok {
						continue
					}
				}
				if !p.features.PartitionableDevices && len(d.ConsumesCounters) > 0 {
					continue
				}
				v.devices[structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)] = visDevice{dev: d, poolKey: k}
			}
		}
	}
	return v
}

func poolKeyOf(s *resourceapi.ResourceSlice) string { return s.Spec.Driver + "/" + s.Spec.Pool.Name }

// selectsNode: the slice has devices for the problem's node.
func selectsNode(p *problem, s *resourceapi.ResourceSlice) bool {
	switch {
	case s.Spec.NodeName != nil:
		return *s.Spec.NodeName == p.node.Name
	case ptr.Deref(s.Spec.AllNodes, false):
		return true
	case s.Spec.NodeSelector != nil:
		ok, _ := nodeMatches(p.node, "", false, s.Spec.NodeSelector)
		return ok
	case ptr.Deref(s.Spec.PerDeviceNodeSelection, false):
		if !p.features.PartitionableDevices {
			return false
		}
		for _, d := range s.Spec.Devices {
			if ok, _ := nodeMatches(p.node, ptr.Deref(d.NodeName, ""), ptr.Deref(d.AllNodes, false), d.NodeSelector); ok {
				return true
			}
		}
	}
	return false
}

// checkCounters: in every pool that got new counter consumption, no counter
// is consumed beyond its total by held and new devices together.
func (v *visibility) checkCounters(p *problem, newlyHeld map[structured.DeviceID]bool, touched map[string]bool) error {
	for k := range touched {
		vp := v.pools[k]
		used := map[string]map[string]resource.Quantity{}
		for _, s := range vp.slices {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
				if !held(p, id) && !newlyHeld[id] {
					continue
				}
				for _, cc := range d.ConsumesCounters {
					if used[cc.CounterSet] == nil {
						used[cc.CounterSet] = map[string]resource.Quantity{}
					}
					for n, c := range cc.Counters {
						q := used[cc.CounterSet][n]
						q.Add(c.Value)
						used[cc.CounterSet][n] = q
					}
				}
			}
		}
		for set, counters := range vp.counters {
			for n, total := range counters {
				u := used[set][n]
				if u.Cmp(total) > 0 {
					return fmt.Errorf("pool %s: counter %s/%s overcommitted: %s > %s", k, set, n, u.String(), total.String())
				}
			}
		}
	}
	return nil
}
