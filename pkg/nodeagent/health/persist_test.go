package health

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// restart starts a new monitor on the same GPUs, state file and clock,
// as a restarted agent does.
func (f *fixture) restart(o Options) {
	f.t.Helper()
	if o.Policy.RecoverAfter.Duration == 0 {
		o.Policy = config.Default().Health
	}
	o.Now = func() time.Time { return f.now }
	f.m = New(f.lib, f.uuids, o)
	if err := f.m.Restore(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

func bootFile(t *testing.T, dir, id string) string {
	t.Helper()
	path := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The agent restarts (a rollout, an OOM kill): taints, flap history and
// the wait for a reset carry over. A reboot of the node counts as the
// reset a fatal Xid waits for, unless an operator must acknowledge it.
func TestTaintsOutliveTheAgent(t *testing.T) {
	dir := t.TempDir()
	o := Options{StatePath: filepath.Join(dir, "health.json"), BootIDPath: bootFile(t, dir, "boot-1")}
	f := newFixture(t, o)
	f.xid(3, 48)  // fatal, no recovery action reported: waits for evidence
	for range 3 { // GPU 5 flaps: three onsets within the hour
		f.xid(5, 92)
		f.after(6 * time.Minute)
	}
	f.xid(5, 92)
	f.xid(4, 92) // NoSchedule
	f.after(time.Second)

	f.restart(o)
	f.want(3, noExecute, "restarted, fatal Xid not reset")
	f.want(4, noSchedule, "restarted 1s after the Xid")
	f.want(5, noSchedule, "restarted, flapping")
	f.after(10 * time.Minute)
	f.want(3, noExecute, "10m later, still no reset")
	f.want(4, untainted, "quiet for recoverAfter")
	f.want(5, noSchedule, "flapping: waits out flapWindow")

	// The node reboots.
	o.BootIDPath = bootFile(t, dir, "boot-2")
	f.restart(o)
	f.want(3, noExecute, "just rebooted")
	f.after(5 * time.Minute)
	f.want(3, untainted, "rebooted, then quiet for recoverAfter")

	// With fatalRecovery "operator" a reboot is not enough.
	f.xid(6, 48)
	f.after(time.Second)
	o.BootIDPath = bootFile(t, dir, "boot-3")
	o.Policy = config.Default().Health
	o.Policy.FatalRecovery = config.RecoverByOperator
	f.restart(o)
	f.after(time.Hour)
	f.want(6, noExecute, "rebooted, waiting for the operator")
}

// A state file that cannot be read is reported; the monitor starts with
// healthy GPUs rather than not at all.
func TestUnreadableHealthState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{StatePath: path})
	if err := f.m.Restore(f.ctx); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Restore: %v, want an error naming %s", err, path)
	}
	f.want(0, untainted, "after an unreadable state")
	f.xid(0, 48)
	f.restart(Options{StatePath: path})
	f.want(0, noExecute, "the state is written afresh")
}

// The state file was unreadable, so the agent takes up the taints its
// slices carry: a fatal Xid's waits for evidence of recovery (here, with
// fatalRecovery "operator", for the operator), a lost GPU's and a
// NoSchedule taint lift after recoverAfter from now, and the state is
// written afresh with them.
func TestAdoptedTaints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{StatePath: path, AckDir: filepath.Join(dir, "ack")}
	o.Policy = config.Default().Health
	o.Policy.FatalRecovery = config.RecoverByOperator
	f := newFixture(t, o)
	if err := f.m.Restore(f.ctx); err == nil {
		t.Fatal("Restore of an unreadable state: no error")
	}
	since := f.now.Add(-time.Hour)
	f.m.Adopt(f.ctx, map[string]resources.Taint{
		f.uuids[1]:  {Value: "xid-48", Effect: noExecute, Since: since},
		f.uuids[2]:  {Value: lostValue, Effect: noExecute, Since: since},
		f.uuids[3]:  {Value: "xid-92", Effect: noSchedule, Since: since},
		"GPU-other": {Value: "xid-48", Effect: noExecute, Since: since},
	})
	f.want(0, untainted, "adopted")
	f.want(1, noExecute, "adopted")
	f.want(2, noExecute, "adopted")
	f.want(3, noSchedule, "adopted")
	if got := f.m.Taints()[f.uuids[1]]; got.Value != "xid-48" || !got.Since.Equal(since) {
		t.Errorf("adopted taint %+v, want xid-48 since %v", got, since)
	}
	f.after(4 * time.Minute)
	f.want(3, noSchedule, "4m after adopting: the quiet period starts at the restart")
	f.after(2 * time.Minute)
	f.want(1, noExecute, "6m later: waits for the operator")
	f.want(2, untainted, "6m later, answering")
	f.want(3, untainted, "6m later")

	f.restart(o)
	f.want(1, noExecute, "restarted: the adopted taint was saved")
	if err := os.MkdirAll(o.AckDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.AckDir, f.uuids[1]), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.after(5 * time.Minute)
	f.want(1, untainted, "acknowledged")
}

// operatorRecoveryFixture is a monitor with a state file whose fatal
// taints wait for an operator, so that only the file keeps them.
func operatorRecoveryFixture(t *testing.T) (*fixture, Options) {
	dir := t.TempDir()
	o := Options{StatePath: filepath.Join(dir, "health.json"), BootIDPath: bootFile(t, dir, "boot-1")}
	o.Policy = config.Default().Health
	o.Policy.FatalRecovery = config.RecoverByOperator
	return newFixture(t, o), o
}

// The agent restarts while a GPU cannot be described (left out at
// discovery): its saved state stays in the file through that run's
// saves, and the run that sees it again restores its taint.
func TestAbsentGPUKeepsItsState(t *testing.T) {
	f, o := operatorRecoveryFixture(t)
	f.xid(5, 48)
	f.after(time.Second)

	all := f.uuids
	f.uuids = slices.Delete(slices.Clone(all), 5, 6) // GPU 5 left out
	f.restart(o)
	f.xid(1, 92) // a change: the file is written again
	f.after(time.Second)

	f.uuids = all
	f.restart(o)
	f.want(5, noExecute, "back after a run that did not see it")
}

// A GPU replaced for good (returned for repair, a new one in its place)
// is forgotten once a run does not see it, unless it holds something a
// later run must know: its taint.
func TestAbsentHealthyGPUForgotten(t *testing.T) {
	f, o := operatorRecoveryFixture(t)
	f.xid(5, 48) // GPU 5 tainted; GPU 6 healthy
	f.after(time.Second)
	tainted, healthy := f.uuids[5], f.uuids[6]

	f.uuids = slices.Delete(slices.Clone(f.uuids), 5, 7) // both replaced
	f.restart(o)
	f.xid(1, 92) // a change: the file is written again
	f.after(time.Second)

	data, err := os.ReadFile(o.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), healthy) {
		t.Errorf("state file keeps healthy GPU %s that no run sees: %s", healthy, data)
	}
	if !strings.Contains(string(data), tainted) {
		t.Errorf("state file lost tainted GPU %s that no run sees: %s", tainted, data)
	}
}
