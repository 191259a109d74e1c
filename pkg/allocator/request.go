package allocator

import (
	"fmt"
	"math"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// req is one request, or one subrequest of a firstAvailable request, as the
// search sees it.
type req struct {
	idx        int // dense index over all reqs of a session
	claim      int
	group      int // index of the request in the claim
	sub        int // index of the subrequest, 0 otherwise
	base, name string
	subName    string // "" for a plain request
	className  string
	class      *resourceapi.DeviceClass
	all        bool
	count      int
	admin      bool
	selectors  []resourceapi.DeviceSelector
	tolerate   []resourceapi.DeviceToleration
	capacity   *resourceapi.CapacityRequirements
	capKey     string // capacityKey(capacity)
	// container: in an extended-resource claim (KEP-5004), the index of
	// the container the request serves, whose GPUs' links count apart
	// (linkGroups); -1 in any other claim.
	container int
}

// group is one entry of spec.devices.requests: one req, or the
// alternatives of a firstAvailable request in order of preference.
type group struct {
	alts   []*req
	hasSub bool
}

type claimPlan struct {
	claim       *resourceapi.ResourceClaim
	groups      []group
	constraints []resourceapi.DeviceConstraint
}

// plan validates the claims the way upstream does before searching and
// builds the per-request data. Errors are input errors: no node can help.
func (s *Session) plan() error {
	f := s.eng.features
	for ci, claim := range s.claims {
		p := claimPlan{claim: claim}
		for gi := range claim.Spec.Devices.Requests {
			r := &claim.Spec.Devices.Requests[gi]
			g := group{hasSub: len(r.FirstAvailable) > 0}
			if g.hasSub && !f.PrioritizedList {
				return fmt.Errorf("claim %s, request %s: has subrequests, but the DRAPrioritizedList feature is disabled", klog.KObj(claim), r.Name)
			}
			if !f.ConsumableCapacity && !s.legacy {
				if r.Exactly != nil && r.Exactly.Capacity != nil {
					return fmt.Errorf("claim %s, request %s: has capacity requests, but the DRAConsumableCapacity feature is disabled", klog.KObj(claim), r.Name)
				}
				for _, sr := range r.FirstAvailable {
					if sr.Capacity != nil {
						return fmt.Errorf("claim %s, subrequest %s: has capacity requests, but the DRAConsumableCapacity feature is disabled", klog.KObj(claim), sr.Name)
					}
				}
			}
			if g.hasSub {
				for si := range r.FirstAvailable {
					sr := &r.FirstAvailable[si]
					q, err := s.newReq(claim, ci, gi, si, r.Name, sr.Name, subSpec(sr))
					if err != nil {
						return err
					}
					g.alts = append(g.alts, q)
				}
			} else {
				if r.Exactly == nil {
					return fmt.Errorf("claim %s, request %s: spec.devices.requests[%d]: neither exactly nor firstAvailable is set", klog.KObj(claim), r.Name, gi)
				}
				q, err := s.newReq(claim, ci, gi, 0, r.Name, "", exactSpec(r.Exactly))
				if err != nil {
					return err
				}
				g.alts = append(g.alts, q)
			}
			p.groups = append(p.groups, g)
		}
		for i, c := range claim.Spec.Devices.Constraints {
			if c.MatchAttribute == nil && (c.DistinctAttribute == nil || s.legacy) {
				return fmt.Errorf("claim %s, constraint #%d: empty constraint (unsupported constraint type?)", klog.KObj(claim), i)
			}
		}
		p.constraints = claim.Spec.Devices.Constraints
		s.plans = append(s.plans, p)
	}
	return nil
}

// reqSpec is what requests and subrequests have in common.
type reqSpec struct {
	className   string
	mode        resourceapi.DeviceAllocationMode
	count       int64
	adminAccess *bool
	selectors   []resourceapi.DeviceSelector
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements
	derived     int
}

func exactSpec(e *resourceapi.ExactDeviceRequest) reqSpec {
	return reqSpec{e.DeviceClassName, e.AllocationMode, e.Count, e.AdminAccess, e.Selectors, e.Tolerations, e.Capacity, len(e.DerivedAttributes)}
}

func subSpec(e *resourceapi.DeviceSubRequest) reqSpec {
	return reqSpec{e.DeviceClassName, e.AllocationMode, e.Count, nil, e.Selectors, e.Tolerations, e.Capacity, len(e.DerivedAttributes)}
}

// extendedContainer is the container an extended-resource claim's
// request serves (contract.ExtendedRequestName), -1 for a request of any
// other claim.
func extendedContainer(claim *resourceapi.ResourceClaim, request string) int {
	if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		return -1
	}
	if i, ok := contract.ExtendedRequestContainer(request); ok {
		return i
	}
	return -1
}

func (s *Session) newReq(claim *resourceapi.ResourceClaim, ci, gi, si int, base, sub string, spec reqSpec) (*req, error) {
	q := &req{
		idx: len(s.reqs), claim: ci, group: gi, sub: si,
		base: base, name: base, subName: sub,
		className: spec.className,
		admin:     ptr.Deref(spec.adminAccess, false),
		selectors: spec.selectors, tolerate: spec.tolerations, capacity: spec.capacity,
		capKey:    capacityKey(spec.capacity),
		container: extendedContainer(claim, base),
	}
	if sub != "" {
		q.name = base + "/" + sub
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("claim %s, request %s: "+format, append([]any{klog.KObj(claim), q.subOrBase()}, args...)...)
	}
	if spec.derived > 0 {
		return nil, bad("cannot handle request with derived attributes, the feature is disabled")
	}
	for i, sel := range spec.selectors {
		if sel.CEL == nil {
			return nil, bad("selector #%d: CEL expression empty (unsupported selector type?)", i)
		}
	}
	if !s.eng.features.AdminAccess && spec.adminAccess != nil {
		return nil, bad("admin access is requested, but the feature is disabled")
	}
	if spec.className == "" {
		return nil, bad("missing device class name (unsupported request type?)")
	}
	class, err := s.classes.Get(spec.className)
	if err != nil {
		return nil, bad("could not retrieve device class %s: %w", spec.className, err)
	}
	if class == nil {
		return nil, bad("could not retrieve device class %s: not found", spec.className)
	}
	q.class = class
	switch spec.mode {
	case resourceapi.DeviceAllocationModeExactCount:
		// As upstream: only what an int cannot hold is refused here; a
		// count past the result limit fails the search of that request
		// (a firstAvailable alternative is then skipped).
		if spec.count > math.MaxInt {
			return nil, bad("exact count %d is too large", spec.count)
		}
		q.count = int(spec.count)
	case resourceapi.DeviceAllocationModeAll:
		q.all = true
	default:
		return nil, bad("unsupported count mode %s", spec.mode)
	}
	s.reqs = append(s.reqs, q)
	s.admin = s.admin || q.admin
	return q, nil
}

// subOrBase is the name upstream uses in messages: the subrequest's own
// name for a subrequest.
func (q *req) subOrBase() string {
	if q.subName != "" {
		return q.subName
	}
	return q.base
}
