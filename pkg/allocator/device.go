package allocator

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
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

	// capDefault caches newCapFit for requests without capacity
	// requirements, by FractionalCapacityRange (0 off, 1 on).
	capDefault [2]*capFit

	mu sync.Mutex
	// matches caches CEL selector results by expression. A device's
	// attributes never change (a changed slice is a new object, hence a
	// new Inventory), so results stay valid for the Inventory's life.
	matches map[string]bool
}

type counterUse struct {
	idx   int
	milli int64
}

func newDevice(s *resourceapi.ResourceSlice, i int) *device {
	d := &s.Spec.Devices[i]
	return &device{
		id:    structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name),
		api:   d,
		slice: s,
		multi: ptr.Deref(d.AllowMultipleAllocations, false),
	}
}

// match evaluates one CEL selector against the device, from the cache when
// possible. Errors are never cached: upstream reports them each time.
//
// legacy hides allowMultipleAllocations from the expression, as upstream's
// stable allocator does; the cache keeps those results apart.
func (d *device) match(ctx context.Context, celCache *cel.Cache, expression string, legacy bool) (bool, error) {
	key := expression
	if legacy {
		key = "\x00legacy\x00" + expression
	}
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
		d.matches = make(map[string]bool, 2)
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

// defaultCapFit is what a request without capacity requirements needs of
// the device; it never changes, so it is computed once.
func (d *device) defaultCapFit(fractional bool) *capFit {
	i := 0
	if fractional {
		i = 1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capDefault[i] == nil {
		d.capDefault[i] = newCapFit(nil, d.api.Capacity, fractional)
	}
	return d.capDefault[i]
}
