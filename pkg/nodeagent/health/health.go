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
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/boot"
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
	// StatePath is the file the monitor keeps its state in across
	// restarts (persist.go); empty: none.
	StatePath string
	// BootIDPath tells one boot of the node from the next; default
	// boot.IDPath.
	BootIDPath string
}

// Monitor keeps the health taints of a node's GPUs.
type Monitor struct {
	lib     nvml.Interface
	uuids   []string
	opts    Options
	changed chan struct{}

	boot string // this boot's ID (persist.go)

	mu    sync.Mutex
	gpus  map[string]*gpuState
	saved []byte // the state last written to opts.StatePath
	// absent: saved state of GPUs this run does not see (one lost at
	// start), kept in the file for the run that sees them again.
	absent map[string]savedGPU
	// handles: each GPU's NVML handle when it last answered, to name the
	// GPU of an Xid that NVML can no longer ask (Xid 79: it is lost).
	handles map[string]nvml.Device
	// unwatched: GPUs whose Xids NVML would not deliver, said once each
	// (the event set is made again after every lost GPU).
	unwatched map[string]bool
}

// New watches the GPUs with the given UUIDs.
func New(lib nvml.Interface, uuids []string, o Options) *Monitor {
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BootIDPath == "" {
		o.BootIDPath = boot.IDPath
	}
	m := &Monitor{lib: lib, uuids: uuids, opts: o, changed: make(chan struct{}, 1), gpus: map[string]*gpuState{}, boot: boot.ID(o.BootIDPath),
		handles: map[string]nvml.Device{}, unwatched: map[string]bool{}}
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
//
// NVML's event wait fails at once, every time, while a GPU registered
// with the set is lost (Xid 79): the other GPUs' Xids would go unseen.
// So the set holds only GPUs that answer, and is made again when one is
// lost or comes back.
func (m *Monitor) Run(ctx context.Context) error {
	if ret := m.lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("health: NVML init: %s", nvml.ErrorString(ret))
	}
	defer m.lib.Shutdown()
	w, ok := m.watch(ctx)
	if !ok {
		m.probeOnly(ctx)
		return nil
	}
	// w changes as GPUs come and go; a failed re-watch leaves no set.
	defer func() {
		if w.set != nil {
			w.set.Free()
		}
	}()
	// Probes are paced by the wall clock; taint ages use opts.Now.
	next := time.Now()
	failing := false // the event waits fail (said once, at the first)
	for ctx.Err() == nil {
		ev, ret := w.set.Wait(200)
		switch ret {
		case nvml.SUCCESS:
			m.event(ctx, ev)
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_GPU_IS_LOST:
			next = time.Now() // probe now: it taints the lost GPU
		default:
			if !failing {
				klog.FromContext(ctx).Info("Waiting for Xid events fails, probing meanwhile", "result", nvml.ErrorString(ret))
			}
			klog.FromContext(ctx).V(4).Info("Event wait", "result", nvml.ErrorString(ret))
			pause(ctx, waitErrorPause)
		}
		failing = ret != nvml.SUCCESS && ret != nvml.ERROR_TIMEOUT && ret != nvml.ERROR_GPU_IS_LOST
		if now := time.Now(); !now.Before(next) {
			answered := m.probe(ctx)
			next = now.Add(m.opts.ProbeInterval)
			if maps.Equal(answered, w.gpus) && ret == nvml.ERROR_GPU_IS_LOST {
				// NVML says a GPU is lost, yet every watched one
				// answers: wait as after any failed wait, not spin.
				pause(ctx, waitErrorPause)
			}
			if !maps.Equal(answered, w.gpus) {
				m.drain(ctx, w)
				w.set.Free()
				if w, ok = m.watch(ctx); !ok {
					m.probeOnly(ctx)
					return nil
				}
			}
		}
	}
	return nil
}

// watched is an event set and the GPUs registered with it.
type watched struct {
	set  nvml.EventSet
	gpus map[string]bool
}

// watch makes an event set for the Xids of the GPUs that answer; false
// when NVML gives none (probes still find lost GPUs).
func (m *Monitor) watch(ctx context.Context) (watched, bool) {
	logger := klog.FromContext(ctx)
	set, ret := m.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		logger.Info("No NVML event set, probing only", "reason", nvml.ErrorString(ret))
		return watched{}, false
	}
	w := watched{set: set, gpus: map[string]bool{}}
	for _, uuid := range m.uuids {
		d, ok := m.answers(uuid)
		if !ok {
			m.lost(ctx, uuid)
			continue
		}
		w.gpus[uuid] = true
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS && !m.unwatched[uuid] {
			// Some GPUs (and vGPUs) do not deliver events: probing only,
			// which finds a lost GPU and no Xid. An operator reading the
			// log at the default verbosity must know.
			logger.Info("No Xid events from GPU, probing only", "uuid", uuid, "reason", nvml.ErrorString(ret))
			m.unwatched[uuid] = true
		}
	}
	return w, true
}

// drain handles the events still queued in w's set before it is freed.
func (m *Monitor) drain(ctx context.Context, w watched) {
	for {
		ev, ret := w.set.Wait(0)
		if ret != nvml.SUCCESS {
			return
		}
		m.event(ctx, ev)
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// waitErrorPause is how long Run pauses after NVML's event wait fails.
const waitErrorPause = time.Second

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
	xid := ev.EventData
	uuid, ok := m.uuidOf(ev.Device)
	if !ok {
		klog.FromContext(ctx).Error(nil, "Xid from a GPU the agent cannot name", "xid", xid)
		return
	}
	if ev.GpuInstanceId != noInstance {
		// The rules apply to the GPU as a whole (docs/nodeagent.md); the
		// log says which MIG instance the error came from.
		klog.FromContext(ctx).Info("Xid from a MIG instance", "uuid", uuid, "xid", xid, "gpuInstance", ev.GpuInstanceId, "computeInstance", ev.ComputeInstanceId)
	}
	if slices.Contains(m.opts.Policy.IgnoredXids, xid) {
		klog.FromContext(ctx).V(2).Info("Application Xid, GPU stays healthy", "uuid", uuid, "xid", xid)
		return
	}
	// A recovery action pending (reset, reboot) makes any Xid fatal: the
	// GPU is not usable until it is done (recovery.go waits for it).
	action, known := recoveryAction(ev.Device)
	fatal := slices.Contains(m.opts.Policy.FatalXids, xid) || known && action != nvml.GPU_RECOVERY_ACTION_NONE
	effect := resourceapi.DeviceTaintEffectNoSchedule
	if fatal {
		effect = resourceapi.DeviceTaintEffectNoExecute
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.save(ctx)
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

// noInstance is an event's GPU (or compute) instance ID when the event
// is not a MIG instance's.
const noInstance = 0xffffffff

// uuidOf names the GPU of an event: by asking it, or, when it no longer
// answers, by the handle it had when it last did.
func (m *Monitor) uuidOf(d nvml.Device) (string, bool) {
	if uuid, ret := d.GetUUID(); ret == nvml.SUCCESS {
		return uuid, true
	}
	// Comparing interfaces panics only on one uncomparable dynamic type.
	if d == nil || !reflect.TypeOf(d).Comparable() {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uuid, h := range m.handles {
		if h == d {
			return uuid, true
		}
	}
	return "", false
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
