package allocator

import (
	"errors"
	"fmt"
	"math"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Consumable capacity (KEP-5075) with the upstream request-policy rules:
// a request without a value takes the policy default or the whole
// capacity; validRange rounds up to min + n*step; validValues rounds up to
// the next listed value; the result must satisfy the policy and fit in
// what is left of the device.

var errNotRepresentable = errors.New("capacity request cannot be represented in the device's range arithmetic")

// capFit is what a request needs of a device, independent of what is
// allocated: computed once per request and device.
type capFit struct {
	// possible is false when the request names a capacity the device
	// lacks, or asks for a value the device's policy forbids.
	possible bool
	consumed map[resourceapi.QualifiedName]resource.Quantity
	// vec and vecF are consumed in the order of device.capNames.
	vec  []resource.Quantity
	vecF []float64
	err  error
	// alone: fits on the device with nothing else allocated there.
	alone bool
}

func newCapFit(req *resourceapi.CapacityRequirements, d *device, fractional bool) *capFit {
	f := &capFit{}
	caps := d.api.Capacity
	if req != nil {
		for name := range req.Requests {
			if _, ok := caps[name]; !ok {
				return f
			}
		}
	}
	f.consumed, f.err = consumption(req, caps, fractional)
	if f.err != nil {
		return f
	}
	for name, c := range caps {
		if violatesPolicy(f.consumed[name], c.RequestPolicy, fractional) {
			return f
		}
	}
	f.vec = make([]resource.Quantity, len(d.capNames))
	f.vecF = make([]float64, len(d.capNames))
	for i, name := range d.capNames {
		f.vec[i] = f.consumed[name]
		f.vecF[i] = f.vec[i].AsApproximateFloat64()
	}
	f.possible = true
	f.alone, _ = f.fits(d, nil, nil)
	return f
}

// fits reports whether the request fits given what the ledger (held) and
// this allocation (pending, in capNames order) already consume on the
// device.
func (f *capFit) fits(d *device, held structured.ConsumedCapacity, pending []resource.Quantity) (bool, error) {
	if !f.possible {
		return false, f.err
	}
	if held == nil && pending == nil && f.vec != nil && f.alone {
		return true, nil
	}
	for i, name := range d.capNames {
		total := f.vec[i].DeepCopy()
		if h, ok := held[name]; ok && h != nil {
			total.Add(*h)
		}
		if pending != nil {
			total.Add(pending[i])
		}
		if total.Cmp(d.capValues[i]) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// consumption computes what a request consumes of every capacity of a
// device.
func consumption(req *resourceapi.CapacityRequirements, caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, fractional bool) (map[resourceapi.QualifiedName]resource.Quantity, error) {
	out := make(map[resourceapi.QualifiedName]resource.Quantity, len(caps))
	for name, c := range caps {
		var asked *resource.Quantity
		if req != nil {
			if v, ok := req.Requests[name]; ok {
				asked = &v
			}
		}
		v, err := consumed(asked, c, fractional)
		if err != nil {
			return nil, fmt.Errorf("capacity %q: %w", name, err)
		}
		if v.Sign() < 0 {
			return nil, fmt.Errorf("capacity %q: capacity value is negative", name)
		}
		out[name] = v
	}
	return out, nil
}

func consumed(asked *resource.Quantity, c resourceapi.DeviceCapacity, fractional bool) (resource.Quantity, error) {
	policy := c.RequestPolicy
	if asked == nil {
		if policy != nil && policy.Default != nil {
			return policy.Default.DeepCopy(), nil
		}
		return c.Value.DeepCopy(), nil
	}
	switch {
	case policy == nil:
		return asked.DeepCopy(), nil
	case policy.ValidRange != nil && policy.ValidRange.Min != nil:
		return roundUpToStep(asked, policy.ValidRange, fractional)
	case policy.ValidValues != nil:
		for _, v := range policy.ValidValues {
			if asked.Cmp(v) <= 0 {
				return v.DeepCopy(), nil
			}
		}
	}
	return *asked, nil
}

func roundUpToStep(asked *resource.Quantity, r *resourceapi.CapacityRequestPolicyRange, fractional bool) (resource.Quantity, error) {
	if asked.Cmp(*r.Min) < 0 {
		return r.Min.DeepCopy(), nil
	}
	if r.Step == nil {
		return *asked, nil
	}
	if rangeInMilli(r, fractional) {
		a, ok := exactMilli(*asked)
		if !ok {
			return resource.Quantity{}, fmt.Errorf("%w: request %s is not a representable milli value", errNotRepresentable, asked.String())
		}
		step, lo := r.Step.MilliValue(), r.Min.MilliValue()
		n := ceilDiv(a-lo, step)
		if n > (math.MaxInt64-lo)/step {
			return resource.Quantity{}, fmt.Errorf("%w: rounding request %s up to the next step passes the milli-value range", errNotRepresentable, asked.String())
		}
		v := lo + step*n
		if v%1000 == 0 {
			return *resource.NewQuantity(v/1000, r.Step.Format), nil
		}
		return *resource.NewMilliQuantity(v, r.Step.Format), nil
	}
	if asked.CmpInt64(math.MaxInt64) > 0 {
		return resource.Quantity{}, fmt.Errorf("%w: request %s exceeds MaxInt64", errNotRepresentable, asked.String())
	}
	a, step, lo := asked.Value(), r.Step.Value(), r.Min.Value()
	if step <= 0 {
		return resource.Quantity{}, fmt.Errorf("requestPolicy.validRange.step: must be positive, got %s", r.Step.String())
	}
	n := ceilDiv(a-lo, step)
	if lo >= 0 && n > (math.MaxInt64-lo)/step {
		return resource.Quantity{}, fmt.Errorf("%w: rounding request %s up to the next step passes MaxInt64", errNotRepresentable, asked.String())
	}
	return *resource.NewQuantity(lo+step*n, r.Step.Format), nil
}

// ceilDiv rounds a/b towards +inf for a >= 0 and truncates otherwise, as
// the upstream arithmetic does (a is never negative there: asked >= min).
func ceilDiv(a, b int64) int64 {
	n := a / b
	if a%b != 0 {
		n++
	}
	return n
}

func violatesPolicy(v resource.Quantity, p *resourceapi.CapacityRequestPolicy, fractional bool) bool {
	if p == nil {
		return false
	}
	// The default is always allowed. Upstream compares the Quantity
	// structs, which only matches a value copied from the default itself;
	// do the same so that both allocators agree.
	if p.Default != nil && v == *p.Default {
		return false
	}
	switch {
	case p.ValidRange != nil:
		r := p.ValidRange
		if r.Max != nil && v.Cmp(*r.Max) > 0 {
			return true
		}
		if r.Step == nil {
			return false
		}
		var val, step, lo int64
		if rangeInMilli(r, fractional) {
			var ok bool
			if val, ok = exactMilli(v); !ok {
				return true
			}
			step = r.Step.MilliValue()
			lo = milliOrZero(r.Min)
		} else {
			val, step = v.Value(), r.Step.Value()
			if r.Min != nil {
				lo = r.Min.Value()
			}
		}
		return step <= 0 || (val-lo)%step != 0
	case len(p.ValidValues) > 0:
		for _, ok := range p.ValidValues {
			if v.Cmp(ok) == 0 {
				return false
			}
		}
		return true
	}
	return false
}

func milliOrZero(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.MilliValue()
}

// rangeInMilli: with fractional ranges enabled, a range whose bounds and
// step are exact in milli-units (step at least 1m) is computed in
// milli-units, otherwise in whole units.
func rangeInMilli(r *resourceapi.CapacityRequestPolicyRange, fractional bool) bool {
	if !fractional {
		return false
	}
	for _, q := range []*resource.Quantity{r.Min, r.Max} {
		if q != nil {
			if _, ok := exactMilli(*q); !ok {
				return false
			}
		}
	}
	if r.Step != nil {
		s, ok := exactMilli(*r.Step)
		if !ok || s < 1 {
			return false
		}
	}
	return true
}

func exactMilli(q resource.Quantity) (int64, bool) {
	m := q.MilliValue()
	return m, q.Cmp(*resource.NewMilliQuantity(m, q.Format)) == 0
}
