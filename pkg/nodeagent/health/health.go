// Package health watches NVML for critical errors (Xid events) and lost
// GPUs and turns them into device taints: NoSchedule for errors the GPU
// survives, NoExecute for those that need a reset or a GPU that fell off
// the bus. A taint is lifted when the GPU answers again and stayed quiet
// for the configured recovery time.
package health

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// Options of a Monitor.
type Options struct {
	Policy config.HealthPolicy
	// ProbeInterval is how often GPUs are asked whether they still answer
	// (and taints checked for recovery). Default 5s.
	ProbeInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Monitor keeps the health taints of a node's GPUs.
type Monitor struct {
	lib     nvml.Interface
	uuids   []string
	opts    Options
	changed chan struct{}

	mu     sync.Mutex
	taints map[string]resources.Taint
	last   map[string]time.Time // last bad news per GPU
}

// New watches the GPUs with the given UUIDs.
func New(lib nvml.Interface, uuids []string, o Options) *Monitor {
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Monitor{lib: lib, uuids: uuids, opts: o, changed: make(chan struct{}, 1),
		taints: map[string]resources.Taint{}, last: map[string]time.Time{}}
}

// Changed is signalled when the taints change.
func (m *Monitor) Changed() <-chan struct{} { return m.changed }

// Taints returns the current taints by GPU UUID.
func (m *Monitor) Taints() map[string]resources.Taint {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]resources.Taint, len(m.taints))
	for k, v := range m.taints {
		out[k] = v
	}
	return out
}

// Run watches until ctx ends. NVML must stay initialized meanwhile.
func (m *Monitor) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if ret := m.lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("health: NVML init: %s", nvml.ErrorString(ret))
	}
	defer m.lib.Shutdown()
	set, ret := m.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("health: create event set: %s", nvml.ErrorString(ret))
	}
	defer set.Free()
	for _, uuid := range m.uuids {
		d, ret := m.lib.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			m.report(ctx, uuid, "lost", resourceapi.DeviceTaintEffectNoExecute)
			continue
		}
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			// Some GPUs (and vGPUs) do not deliver events: probing only.
			logger.Info("No Xid events from GPU, probing only", "uuid", uuid, "reason", nvml.ErrorString(ret))
		}
	}
	// Probes are paced by the wall clock; taint ages use opts.Now.
	next := time.Now()
	for ctx.Err() == nil {
		ev, ret := set.Wait(200)
		switch ret {
		case nvml.SUCCESS:
			m.event(ctx, ev)
		case nvml.ERROR_TIMEOUT:
		default:
			logger.V(4).Info("Event wait", "result", nvml.ErrorString(ret))
		}
		if now := time.Now(); !now.Before(next) {
			m.Probe(ctx)
			next = now.Add(m.opts.ProbeInterval)
		}
	}
	return nil
}

func (m *Monitor) event(ctx context.Context, ev nvml.EventData) {
	if ev.EventType != nvml.EventTypeXidCriticalError {
		return
	}
	uuid, ret := ev.Device.GetUUID()
	if ret != nvml.SUCCESS {
		return
	}
	xid := ev.EventData
	if slices.Contains(m.opts.Policy.IgnoredXids, xid) {
		klog.FromContext(ctx).V(2).Info("Application Xid, GPU stays healthy", "uuid", uuid, "xid", xid)
		return
	}
	effect := resourceapi.DeviceTaintEffectNoSchedule
	if slices.Contains(m.opts.Policy.FatalXids, xid) {
		effect = resourceapi.DeviceTaintEffectNoExecute
	}
	m.report(ctx, uuid, fmt.Sprintf("xid-%d", xid), effect)
}

// report taints a GPU, keeping the stronger effect of an existing taint.
func (m *Monitor) report(ctx context.Context, uuid, why string, effect resourceapi.DeviceTaintEffect) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	m.last[uuid] = now
	old, had := m.taints[uuid]
	if had && (old.Effect == resourceapi.DeviceTaintEffectNoExecute || old.Effect == effect) {
		return
	}
	klog.FromContext(ctx).Info("GPU unhealthy, tainting its devices", "uuid", uuid, "reason", why, "effect", effect)
	m.taints[uuid] = resources.Taint{Value: why, Effect: effect, Since: now}
	m.signal()
}

// Probe asks every GPU whether it answers, taints lost ones and lifts
// taints whose GPU answers and stayed quiet long enough.
func (m *Monitor) Probe(ctx context.Context) {
	for _, uuid := range m.uuids {
		if !m.answers(uuid) {
			m.report(ctx, uuid, "lost", resourceapi.DeviceTaintEffectNoExecute)
			continue
		}
		m.recover(ctx, uuid)
	}
}

func (m *Monitor) answers(uuid string) bool {
	d, ret := m.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return false
	}
	if _, ret := d.GetUUID(); ret != nvml.SUCCESS {
		return false
	}
	_, ret = d.GetMemoryInfo()
	return ret != nvml.ERROR_GPU_IS_LOST
}

func (m *Monitor) recover(ctx context.Context, uuid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.taints[uuid]
	if !ok {
		return
	}
	quiet := m.opts.Policy.RecoverAfter.Duration
	if t.Effect == resourceapi.DeviceTaintEffectNoExecute && t.Value != "lost" {
		quiet *= 2
	}
	if t.Value == "lost" {
		quiet = 0 // it answers again
	}
	if m.opts.Now().Sub(m.last[uuid]) < quiet {
		return
	}
	klog.FromContext(ctx).Info("GPU healthy again, lifting taint", "uuid", uuid, "reason", t.Value)
	delete(m.taints, uuid)
	m.signal()
}

func (m *Monitor) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}
