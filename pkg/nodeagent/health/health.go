// Package health watches NVML for critical errors (Xid events) and lost
// GPUs and turns them into device taints: NoSchedule for errors the GPU
// survives, NoExecute for those that need a reset or a GPU that fell off
// the bus. Taints lift with hysteresis (state.go): after a quiet period,
// a longer one for a flapping GPU, and for fatal Xids only with evidence
// of recovery (recovery.go).
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
	// AckDir is where an operator acknowledges that a GPU recovered from
	// a fatal Xid, by writing a file named after its UUID; empty: no
	// acknowledgements.
	AckDir string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Monitor keeps the health taints of a node's GPUs.
type Monitor struct {
	lib     nvml.Interface
	uuids   []string
	opts    Options
	changed chan struct{}

	mu   sync.Mutex
	gpus map[string]*gpuState
}

// New watches the GPUs with the given UUIDs.
func New(lib nvml.Interface, uuids []string, o Options) *Monitor {
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Monitor{lib: lib, uuids: uuids, opts: o, changed: make(chan struct{}, 1), gpus: map[string]*gpuState{}}
	for _, uuid := range uuids {
		m.gpus[uuid] = &gpuState{}
	}
	return m
}

// Changed is signalled when the taints change.
func (m *Monitor) Changed() <-chan struct{} { return m.changed }

// Taints returns the current taints by GPU UUID.
func (m *Monitor) Taints() map[string]resources.Taint {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]resources.Taint{}
	for uuid, s := range m.gpus {
		if s.taint != nil {
			out[uuid] = *s.taint
		}
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
		// Without events the probes still find lost GPUs.
		logger.Info("No NVML event set, probing only", "reason", nvml.ErrorString(ret))
		m.probeOnly(ctx)
		return nil
	}
	defer set.Free()
	for _, uuid := range m.uuids {
		d, ret := m.lib.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			m.lost(ctx, uuid)
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

// probeOnly probes every ProbeInterval until ctx ends.
func (m *Monitor) probeOnly(ctx context.Context) {
	tick := time.NewTicker(m.opts.ProbeInterval)
	defer tick.Stop()
	for {
		m.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
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
	fatal := slices.Contains(m.opts.Policy.FatalXids, xid)
	effect := resourceapi.DeviceTaintEffectNoSchedule
	if fatal {
		effect = resourceapi.DeviceTaintEffectNoExecute
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.gpus[uuid]
	if !ok {
		return
	}
	if fatal {
		s.fatalXid()
		m.clearAck(ctx, uuid) // an acknowledgement must follow the Xid
	}
	m.report(ctx, uuid, fmt.Sprintf("xid-%d", xid), effect)
}

// report records bad news about a GPU and taints it, keeping the stronger
// effect of an existing taint. Callers hold m.mu.
func (m *Monitor) report(ctx context.Context, uuid, why string, effect resourceapi.DeviceTaintEffect) {
	s, ok := m.gpus[uuid]
	if !ok {
		return
	}
	if !s.bad(m.opts.Policy, m.opts.Now(), why, effect) {
		return
	}
	klog.FromContext(ctx).Info("GPU unhealthy, tainting its devices", "uuid", uuid, "reason", why, "effect", effect, "flapping", s.flapping)
	m.signal()
}

func (m *Monitor) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}
