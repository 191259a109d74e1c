package health

import (
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// gpuState is what the monitor knows about one GPU. The rules:
//
//   - Bad news is a tainting Xid or a probe that finds the GPU lost. A
//     taint lifts once the GPU answers and has had no bad news for
//     recoverAfter.
//   - An onset is the GPU going from untainted to tainted. The
//     flapThreshold-th onset within flapWindow makes that taint sticky:
//     it lifts only after flapWindow without bad news. Onsets, not Xids,
//     are counted: one incident's burst of Xids is one onset.
//   - After a fatal Xid the taint also waits for evidence of recovery
//     (recovery.go); a later fatal Xid discards the evidence seen so far.
type gpuState struct {
	taint    *resources.Taint // nil while healthy
	last     time.Time        // the last bad news
	onsets   []time.Time      // recent onsets, oldest first
	flapping bool             // this taint waits for flapWindow
	fatal    bool             // this taint waits for evidence of recovery
	evidence evidence
}

// evidence is what the monitor saw of a recovery since the last fatal Xid.
type evidence struct {
	// actionPending: NVML asked for a recovery action (reset, reboot).
	actionPending bool
	// lost: a probe found the GPU lost.
	lost bool
	// recovered: enough evidence; the taint may lift.
	recovered bool
}

// bad records bad news at now and says whether the taint changed.
func (s *gpuState) bad(p config.HealthPolicy, now time.Time, why string, effect resourceapi.DeviceTaintEffect) bool {
	s.last = now
	if s.taint == nil {
		s.onsets = append(since(s.onsets, now.Add(-p.FlapWindow.Duration)), now)
		s.flapping = p.FlapThreshold > 0 && len(s.onsets) >= p.FlapThreshold
	} else if s.taint.Effect == resourceapi.DeviceTaintEffectNoExecute || s.taint.Effect == effect {
		return false
	}
	s.taint = &resources.Taint{Value: why, Effect: effect, Since: now}
	return true
}

// since drops the times before t.
func since(ts []time.Time, t time.Time) []time.Time {
	for len(ts) > 0 && ts[0].Before(t) {
		ts = ts[1:]
	}
	return ts
}

// fatalXid makes the taint wait for new evidence of recovery.
func (s *gpuState) fatalXid() {
	s.fatal = true
	s.evidence = evidence{}
}

// liftable says whether the taint may be lifted at now.
func (s *gpuState) liftable(p config.HealthPolicy, now time.Time) bool {
	if s.taint == nil || (s.fatal && !s.evidence.recovered) {
		return false
	}
	quiet := p.RecoverAfter.Duration
	if s.flapping {
		quiet = max(quiet, p.FlapWindow.Duration)
	}
	return now.Sub(s.last) >= quiet
}

// lift forgets the taint; the onsets stay for the flap rule.
func (s *gpuState) lift() {
	s.taint, s.flapping, s.fatal, s.evidence = nil, false, false, evidence{}
}
