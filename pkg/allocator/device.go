package allocator

import (
	"context"
	"slices"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// device is one device of a ResourceSlice.
type device struct {
	id    structured.DeviceID
	api   *resourceapi.Device
	slice *resourceapi.ResourceSlice
	// multi: allowMultipleAllocations is set.
	multi bool

	gpuOnce sync.Once
	gpuDesc topology.GPU

	// capNames are the device's capacities, sorted; capValues and
	// capTotalF their values in that order.
	capNames  []resourceapi.QualifiedName
	capValues []resource.Quantity
	capTotalF []float64
	// capFits caches newCapFit by request (see capFitFor).
	capFits map[string]*capFit

	mu sync.Mutex
	// matches caches CEL selector results (see match). A device's
	// attributes never change (a changed slice is a new object with new
	// devices), so results never go stale; the cache is bounded because
	// devices outlive pods and their selectors.
	matches map[matchKey]bool
}

// matchKey keys device.matches: legacy results are kept apart.
type matchKey struct {
	expression string
	legacy     bool
}

// maxMatchesPerDevice bounds the cache of selector results.
const maxMatchesPerDevice = 64

// counterUse is what a device consumes of one counter of its pool: idx
// in the pool's dense counter index, milli the amount in the pool's
// counter unit (amounts.go; the name is from when the unit was always a
// milli-unit, and score.go reads it).
type counterUse struct {
	idx   int
	milli int64
}

func newDevice(s *resourceapi.ResourceSlice, i int) *device {
	d := &s.Spec.Devices[i]
	dv := &device{
		id:    structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name),
		api:   d,
		slice: s,
		multi: ptr.Deref(d.AllowMultipleAllocations, false),
	}
	for name := range d.Capacity {
		dv.capNames = append(dv.capNames, name)
	}
	slices.Sort(dv.capNames)
	for _, name := range dv.capNames {
		v := d.Capacity[name].Value
		dv.capValues = append(dv.capValues, v)
		dv.capTotalF = append(dv.capTotalF, v.AsApproximateFloat64())
	}
	return dv
}

// match evaluates one CEL selector against the device, from the cache when
// possible. Errors are never cached: upstream reports them each time.
//
// legacy hides allowMultipleAllocations from the expression, as upstream's
// stable allocator does; the cache keeps those results apart.
//
// A full cache drops one arbitrary entry per new result (map iteration
// starts at a random entry): cheap, and a dropped result that is still
// used, such as a class selector's, is just evaluated again.
func (d *device) match(ctx context.Context, celCache *cel.Cache, expression string, legacy bool) (bool, error) {
	key := matchKey{expression, legacy}
	d.mu.Lock()
	m, ok := d.matches[key]
	d.mu.Unlock()
	if ok {
		return m, nil
	}
	expr := celCache.GetOrCompile(expression)
	if expr.Error != nil {
		return false, errCompile{expr.Error}
	}
	multi := d.api.AllowMultipleAllocations
	if legacy {
		multi = nil
	}
	m, _, err := expr.DeviceMatches(ctx, cel.Device{
		Driver:                   d.slice.Spec.Driver,
		AllowMultipleAllocations: multi,
		Attributes:               d.api.Attributes,
		Capacity:                 d.api.Capacity,
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		return false, errRuntime{cel.EnhanceRuntimeError(err)}
	}
	d.mu.Lock()
	if d.matches == nil {
		d.matches = make(map[matchKey]bool, 2)
	}
	if len(d.matches) >= maxMatchesPerDevice {
		for k := range d.matches {
			delete(d.matches, k)
			break
		}
	}
	d.matches[key] = m
	d.mu.Unlock()
	return m, nil
}

type errCompile struct{ err error }

func (e errCompile) Error() string { return "CEL compile error: " + e.err.Error() }
func (e errCompile) Unwrap() error { return e.err }

type errRuntime struct{ err error }

func (e errRuntime) Error() string { return "CEL runtime error: " + e.err.Error() }
func (e errRuntime) Unwrap() error { return e.err }

// capFitFor is newCapFit for this device, cached by the request's
// canonical form (key): pods ask for a handful of sizes, and what a size
// needs of a device never changes.
func (d *device) capFitFor(req *resourceapi.CapacityRequirements, key string, fractional bool) *capFit {
	if fractional {
		key = "f" + key
	}
	d.mu.Lock()
	f, ok := d.capFits[key]
	d.mu.Unlock()
	if ok {
		return f
	}
	f = newCapFit(req, d, fractional)
	d.mu.Lock()
	if d.capFits == nil {
		d.capFits = make(map[string]*capFit, 2)
	}
	if len(d.capFits) < maxCapFitsPerDevice {
		d.capFits[key] = f
	}
	d.mu.Unlock()
	return f
}

// maxCapFitsPerDevice bounds the cache of distinct request sizes.
const maxCapFitsPerDevice = 64

// capacityKey is the canonical form of capacity requirements.
func capacityKey(req *resourceapi.CapacityRequirements) string {
	if req == nil {
		return ""
	}
	var b strings.Builder
	for _, n := range sortedKeys(req.Requests) {
		v := req.Requests[n]
		b.WriteString(string(n))
		b.WriteByte('=')
		b.WriteString(v.String())
		b.WriteByte(';')
	}
	return b.String()
}
