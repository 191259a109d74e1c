package health

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// fixture drives a Monitor step by step: events and probes are
// delivered synchronously, time is a fake clock.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	lib   *mocknvml.Server
	uuids []string
	now   time.Time
	m     *Monitor
}

func newFixture(t *testing.T, o Options) *fixture {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, d := range lib.Devices {
		uuid, _ := d.GetUUID()
		uuids = append(uuids, uuid)
	}
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{t: t, ctx: ctx, lib: lib, uuids: uuids, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	if o.Policy.RecoverAfter.Duration == 0 {
		o.Policy = config.Default().Health
	}
	o.Now = func() time.Time { return f.now }
	f.m = New(lib, uuids, o)
	return f
}

func (f *fixture) xid(gpu int, xid uint64) {
	f.m.event(f.ctx, nvml.EventData{Device: f.lib.Devices[gpu], EventType: nvml.EventTypeXidCriticalError, EventData: xid})
}

// after lets time pass and probes the GPUs.
func (f *fixture) after(d time.Duration) {
	f.now = f.now.Add(d)
	f.m.Probe(f.ctx)
}

func (f *fixture) want(gpu int, effect resourceapi.DeviceTaintEffect, when string) {
	f.t.Helper()
	got, ok := f.m.Taints()[f.uuids[gpu]]
	switch {
	case effect == "" && ok:
		f.t.Errorf("%s: GPU %d tainted %s (%s), want untainted", when, gpu, got.Effect, got.Value)
	case effect != "" && !ok:
		f.t.Errorf("%s: GPU %d untainted, want %s", when, gpu, effect)
	case effect != "" && got.Effect != effect:
		f.t.Errorf("%s: GPU %d tainted %s, want %s", when, gpu, got.Effect, effect)
	}
}

const (
	noSchedule = resourceapi.DeviceTaintEffectNoSchedule
	noExecute  = resourceapi.DeviceTaintEffectNoExecute
	untainted  = resourceapi.DeviceTaintEffect("")
)

// A taint lifts after recoverAfter (5m) without errors, counted from the
// last error: an Xid, or a probe that found the GPU lost.
func TestTaintLiftsAfterAQuietPeriod(t *testing.T) {
	f := newFixture(t, Options{})
	f.xid(2, 92)
	f.after(4 * time.Minute)
	f.xid(2, 92)
	f.after(4 * time.Minute)
	f.want(2, noSchedule, "4m after the second Xid")
	f.after(time.Minute)
	f.want(2, untainted, "5m after the second Xid")

	f.lib.SetLost(4, true)
	f.after(time.Second)
	f.want(4, noExecute, "lost")
	f.lib.SetLost(4, false)
	f.after(time.Second)
	f.want(4, noExecute, "answering again for 1s")
	f.lib.SetLost(4, true)
	f.after(2 * time.Minute)
	f.lib.SetLost(4, false)
	f.after(4 * time.Minute)
	f.want(4, noExecute, "answering for 4m after it was lost again")
	f.after(time.Minute)
	f.want(4, untainted, "answering for 5m")
}

// The third taint within flapWindow (1h) stays until an hour passes with
// no error; later, a single taint lifts after 5m again.
func TestFlappingGPUStaysTainted(t *testing.T) {
	f := newFixture(t, Options{})
	for cycle := range 2 {
		f.xid(1, 92)
		f.after(5 * time.Minute)
		f.want(1, untainted, fmt.Sprintf("cycle %d", cycle+1))
	}
	f.xid(1, 92)
	f.after(5 * time.Minute)
	f.want(1, noSchedule, "third taint within the hour, 5m later")
	f.after(25 * time.Minute)
	f.xid(1, 92)
	f.after(59 * time.Minute)
	f.want(1, noSchedule, "59m after the last Xid")
	f.after(time.Minute)
	f.want(1, untainted, "an hour after the last Xid")

	f.xid(1, 92)
	f.after(5 * time.Minute)
	f.want(1, untainted, "one taint after the flapping hour, 5m later")
}

// A fatal Xid's taint waits for a reset seen through NVML: the recovery
// action the driver asked for done, or the GPU back after it was lost.
// Time alone does not lift it.
func TestFatalXidWaitsForAReset(t *testing.T) {
	f := newFixture(t, Options{})
	f.lib.SetRecoveryAction(3, nvml.GPU_RECOVERY_ACTION_GPU_RESET)
	f.xid(3, 48)
	f.xid(5, 79)
	f.xid(6, 48) // the driver reports no recovery action
	f.after(time.Second)
	f.lib.SetLost(5, true)
	f.after(24 * time.Hour)
	for _, gpu := range []int{3, 5, 6} {
		f.want(gpu, noExecute, "a day after a fatal Xid")
	}

	f.lib.ResetGPU(3)
	f.lib.ResetGPU(5)
	f.after(time.Second)
	f.want(3, untainted, "reset, a day after the Xid")
	f.want(5, noExecute, "back 1s after it was lost")
	f.after(5 * time.Minute)
	f.want(5, untainted, "back 5m after it was lost")
	f.want(6, noExecute, "no evidence of a reset")
}

// An operator acknowledges a GPU's recovery from a fatal Xid by writing
// a file named after its UUID. It counts in both modes, only if written
// after the Xid, and is removed when the taint lifts. With
// fatalRecovery "operator" a reset seen through NVML does not count.
func TestOperatorAcknowledgesRecovery(t *testing.T) {
	for _, mode := range []config.FatalRecovery{config.RecoverOnReset, config.RecoverByOperator} {
		t.Run(string(mode), func(t *testing.T) {
			policy := config.Default().Health
			policy.FatalRecovery = mode
			f := newFixture(t, Options{Policy: policy, AckDir: t.TempDir()})
			ack := func(gpu int) string {
				path := filepath.Join(f.m.opts.AckDir, f.uuids[gpu])
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			}
			f.lib.SetRecoveryAction(3, nvml.GPU_RECOVERY_ACTION_GPU_RESET)
			f.xid(3, 48)
			stale := ack(6)
			f.xid(6, 48)
			f.after(time.Second)
			f.lib.ResetGPU(3)
			f.after(time.Hour)
			if mode == config.RecoverByOperator {
				f.want(3, noExecute, "reset without an acknowledgement")
			} else {
				f.want(3, untainted, "reset")
			}
			f.want(6, noExecute, "acknowledged before the Xid")
			if _, err := os.Stat(stale); !os.IsNotExist(err) {
				t.Errorf("acknowledgement written before the Xid still there: %v", err)
			}

			if mode == config.RecoverByOperator {
				ack(3)
			}
			path := ack(6)
			f.after(time.Second)
			f.want(3, untainted, "acknowledged")
			f.want(6, untainted, "acknowledged after the Xid")
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("acknowledgement not removed when the taint lifted: %v", err)
			}
		})
	}
}

// Xid 79: by the time the event is read the GPU has fallen off the bus
// and NVML cannot name it. The monitor names it by the handle it had and
// applies the fatal rule: with fatalRecovery "operator" the taint waits
// for the acknowledgement even after a reset.
func TestXidOfALostGPU(t *testing.T) {
	policy := config.Default().Health
	policy.FatalRecovery = config.RecoverByOperator
	f := newFixture(t, Options{Policy: policy, AckDir: t.TempDir()})
	f.after(0) // the GPUs answer once
	f.lib.SetLost(3, true)
	f.xid(3, 79)
	if got := f.m.Taints()[f.uuids[3]]; got.Value != "xid-79" || got.Effect != noExecute {
		t.Fatalf("taint %+v, want xid-79 NoExecute", got)
	}
	f.after(time.Second)
	f.lib.ResetGPU(3)
	f.after(6 * time.Minute)
	f.want(3, noExecute, "reset, no acknowledgement")
	if err := os.WriteFile(filepath.Join(f.m.opts.AckDir, f.uuids[3]), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.after(time.Second)
	f.want(3, untainted, "acknowledged")
}

// The driver asks for a recovery action (a reset): any Xid is then
// fatal, evicting pods, and its taint waits for the action to be done,
// not for a quiet period. Xid 154 (the action changed) is fatal itself.
func TestRecoveryActionMakesAnXidFatal(t *testing.T) {
	f := newFixture(t, Options{})
	f.lib.SetRecoveryAction(2, nvml.GPU_RECOVERY_ACTION_GPU_RESET)
	f.xid(2, 62)
	f.xid(4, 154)
	f.after(6 * time.Minute)
	f.want(2, noExecute, "6m after an Xid with a reset pending")
	f.want(4, noExecute, "6m after Xid 154")
	f.lib.ResetGPU(2)
	f.after(time.Second)
	f.want(2, untainted, "reset done")
	f.xid(5, 62) // no action pending: survivable
	f.want(5, noSchedule, "an Xid without a pending action")
}
