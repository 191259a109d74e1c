package health

import (
	"context"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
)

// Probe asks every GPU whether it answers, taints lost ones, looks for
// evidence of recovery and lifts the taints the rules allow (state.go).
func (m *Monitor) Probe(ctx context.Context) { m.probe(ctx) }

// probe is Probe, and returns the GPUs that answered.
func (m *Monitor) probe(ctx context.Context) map[string]bool {
	answered := make(map[string]bool, len(m.uuids))
	for _, uuid := range m.uuids {
		d, ok := m.answers(uuid)
		if !ok {
			m.lost(ctx, uuid)
			continue
		}
		answered[uuid] = true
		m.recover(ctx, uuid, d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.save(ctx)
	return answered
}

// answers returns the GPU's handle when it answers.
func (m *Monitor) answers(uuid string) (nvml.Device, bool) {
	d, ret := m.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, false
	}
	if _, ret := d.GetUUID(); ret != nvml.SUCCESS {
		return nil, false
	}
	if _, ret = d.GetMemoryInfo(); ret == nvml.ERROR_GPU_IS_LOST {
		return nil, false
	}
	m.mu.Lock()
	m.handles[uuid] = d
	m.mu.Unlock()
	return d, true
}

// lostValue is the taint value of a GPU that no longer answers.
const lostValue = "lost"

func (m *Monitor) lost(ctx context.Context, uuid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.gpus[uuid]; ok {
		s.evidence.lost = true
	}
	m.report(ctx, uuid, lostValue, resourceapi.DeviceTaintEffectNoExecute)
}

func (m *Monitor) recover(ctx context.Context, uuid string, d nvml.Device) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.gpus[uuid]
	if s.taint == nil {
		return
	}
	if s.fatal && !s.evidence.recovered {
		m.lookForRecovery(ctx, uuid, d, s)
	}
	if !s.liftable(m.opts.Policy, m.opts.Now()) {
		return
	}
	klog.FromContext(ctx).Info("GPU healthy again, lifting taint", "uuid", uuid, "reason", s.taint.Value)
	s.lift()
	m.clearAck(ctx, uuid)
	m.signal()
}
