package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/atomicfile"
	"github.com/gputopo/gputopo/pkg/nodeagent/boot"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// The monitor's knowledge outlives the agent (a rollout, an OOM kill): a
// fatal Xid's taint must not lift, nor a flapping GPU's history vanish,
// because the agent restarted. It is written to Options.StatePath after
// every change and read back by Restore. A node reboot resets every GPU,
// so after one (the kernel's boot ID changed) a fatal taint counts as
// reset; with fatalRecovery "operator" it still waits for the operator.

const stateVersion = 1

type stateFile struct {
	Version int                 `json:"version"`
	BootID  string              `json:"bootID,omitempty"`
	GPUs    map[string]savedGPU `json:"gpus"`
}

// savedGPU is a gpuState as the file keeps it.
type savedGPU struct {
	Taint         *resources.Taint `json:"taint,omitempty"`
	Last          time.Time        `json:"last"`
	Onsets        []time.Time      `json:"onsets,omitempty"`
	Flapping      bool             `json:"flapping,omitempty"`
	Fatal         bool             `json:"fatal,omitempty"`
	ActionPending bool             `json:"actionPending,omitempty"`
	Lost          bool             `json:"lost,omitempty"`
	Recovered     bool             `json:"recovered,omitempty"`
}

func (s *gpuState) saved() savedGPU {
	return savedGPU{Taint: s.taint, Last: s.last, Onsets: s.onsets, Flapping: s.flapping, Fatal: s.fatal,
		ActionPending: s.evidence.actionPending, Lost: s.evidence.lost, Recovered: s.evidence.recovered}
}

// matters: the entry holds a taint, a fault waiting for recovery, or an
// onset since flapsFrom (within the flap window), which a later run that
// sees the GPU again must know.
func (g savedGPU) matters(flapsFrom time.Time) bool {
	return g.Taint != nil || g.Fatal || g.ActionPending || g.Lost || g.Flapping ||
		len(since(g.Onsets, flapsFrom)) > 0
}

func (g savedGPU) state() *gpuState {
	return &gpuState{taint: g.Taint, last: g.Last, onsets: g.Onsets, flapping: g.Flapping, fatal: g.Fatal,
		evidence: evidence{actionPending: g.ActionPending, lost: g.Lost, recovered: g.Recovered}}
}

// Restore reads what an earlier run of the agent knew of these GPUs. A
// GPU this run does not see (lost, or left out at discovery) keeps its
// entry in the file, so that its taint is there when a later run sees it
// again, if it holds anything (matters): a healthy GPU replaced for good
// is forgotten, not carried in the file for ever. A missing file is a first start. An unreadable one is an error,
// and the monitor starts afresh.
func (m *Monitor) Restore(ctx context.Context) error {
	if m.opts.StatePath == "" {
		return nil
	}
	data, err := atomicfile.Read(m.opts.StatePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("health state %s: %w", m.opts.StatePath, err)
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("health state %s: %w", m.opts.StatePath, err)
	}
	if f.Version != stateVersion {
		return fmt.Errorf("health state %s: version %d, this agent reads %d", m.opts.StatePath, f.Version, stateVersion)
	}
	rebooted := boot.Changed(f.BootID, m.boot)
	m.mu.Lock()
	defer m.mu.Unlock()
	for uuid, g := range f.GPUs {
		if _, ok := m.gpus[uuid]; !ok {
			if g.matters(m.opts.Now().Add(-m.opts.Policy.FlapWindow.Duration)) {
				if m.absent == nil {
					m.absent = map[string]savedGPU{}
				}
				m.absent[uuid] = g
			}
			continue
		}
		s := g.state()
		if rebooted && s.fatal && !s.evidence.recovered && m.opts.Policy.FatalRecovery == config.RecoverOnReset {
			s.evidence.recovered = true
			klog.FromContext(ctx).Info("GPU recovered from a fatal Xid", "uuid", uuid, "evidence", "node rebooted")
		}
		m.gpus[uuid] = s
		if s.taint != nil {
			klog.FromContext(ctx).Info("GPU still tainted from before the agent restarted", "uuid", uuid, "reason", s.taint.Value, "effect", s.taint.Effect, "since", s.taint.Since)
		}
	}
	m.saved, _ = m.encode()
	return nil
}

// Adopt takes up the taints the GPUs' published devices carry, by GPU
// UUID, for when the state file could not be read: the API server keeps
// the node's slices while the agent restarts, so they are the other record
// of the taints. A NoExecute taint other than a lost GPU's is taken for a
// fatal Xid's and waits for evidence of recovery; the quiet period of
// every adopted taint starts now. GPUs this run does not see are skipped.
func (m *Monitor) Adopt(ctx context.Context, taints map[string]resources.Taint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	for uuid, t := range taints {
		s, ok := m.gpus[uuid]
		if !ok || s.taint != nil {
			continue
		}
		s.taint = &t
		s.last = now
		if t.Effect == resourceapi.DeviceTaintEffectNoExecute && t.Value != lostValue {
			s.fatalXid()
		}
		klog.FromContext(ctx).Info("GPU taint taken up from the published slices", "uuid", uuid, "reason", t.Value, "effect", t.Effect, "since", t.Since)
	}
	m.save(ctx)
}

// save writes the state when it changed. Callers hold m.mu.
func (m *Monitor) save(ctx context.Context) {
	if m.opts.StatePath == "" {
		return
	}
	data, err := m.encode()
	if err == nil && bytes.Equal(data, m.saved) {
		return
	}
	if err == nil {
		err = atomicfile.Write(m.opts.StatePath, data)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Saving the GPUs' health state; a restart would forget it", "path", m.opts.StatePath)
		return
	}
	m.saved = data
}

func (m *Monitor) encode() ([]byte, error) {
	f := stateFile{Version: stateVersion, BootID: m.boot, GPUs: make(map[string]savedGPU, len(m.gpus)+len(m.absent))}
	maps.Copy(f.GPUs, m.absent)
	for uuid, s := range m.gpus {
		f.GPUs[uuid] = s.saved()
	}
	return json.Marshal(f)
}
