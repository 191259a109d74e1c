package health_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/go-logr/logr/funcr"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/health"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// gpuUUIDs discovers the mock's GPUs, as the agent does before it
// starts the monitor.
func gpuUUIDs(t *testing.T, lib *mocknvml.Server) []string {
	t.Helper()
	gpus, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range gpus {
		uuids = append(uuids, g.UUID)
	}
	return uuids
}

func TestXidAndLostGPUsTaintAndRecover(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	uuids := gpuUUIDs(t, lib)
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	// Run probes once at its start (before it handles the second event);
	// the test probes after that, so no probe of Run's races the clock.
	m := health.New(lib, uuids, health.Options{Policy: config.Default().Health, ProbeInterval: time.Hour, Now: clk.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	waitFor := func(what string, ok func(map[string]resources.Taint) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for m.Probe(ctx); !ok(m.Taints()); m.Probe(ctx) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: taints %v", what, m.Taints())
			}
			select {
			case <-m.Changed():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for i := range uuids {
		for !lib.Registered(i) {
			time.Sleep(time.Millisecond)
		}
	}
	lib.InjectXid(1, 13) // application error: ignored
	lib.InjectXid(2, 92) // high single-bit ECC rate: NoSchedule
	lib.SetRecoveryAction(3, nvml.GPU_RECOVERY_ACTION_GPU_RESET)
	lib.InjectXid(3, 79) // fallen off the bus: NoExecute until a reset
	lib.SetLost(4, true)
	waitFor("taints", func(ts map[string]resources.Taint) bool {
		return ts[uuids[2]].Value == "xid-92" && ts[uuids[2]].Effect == resourceapi.DeviceTaintEffectNoSchedule &&
			ts[uuids[3]].Value == "xid-79" && ts[uuids[3]].Effect == resourceapi.DeviceTaintEffectNoExecute &&
			ts[uuids[4]].Value == "lost" && ts[uuids[4]].Effect == resourceapi.DeviceTaintEffectNoExecute
	})
	if _, ok := m.Taints()[uuids[1]]; ok {
		t.Error("application Xid 13 tainted GPU 1")
	}

	// The lost GPU comes back and the NoSchedule taint ages: both lifted
	// after 5 quiet minutes. The NoExecute one waits for a reset.
	lib.SetLost(4, false)
	clk.Add(6 * time.Minute)
	waitFor("lost GPU back, NoSchedule lifted", func(ts map[string]resources.Taint) bool {
		_, lost := ts[uuids[4]]
		_, noSchedule := ts[uuids[2]]
		return !lost && !noSchedule
	})
	clk.Add(24 * time.Hour)
	m.Probe(ctx)
	if _, ok := m.Taints()[uuids[3]]; !ok {
		t.Error("NoExecute taint lifted without a reset")
	}
	lib.ResetGPU(3)
	waitFor("NoExecute lifted after the reset", func(ts map[string]resources.Taint) bool { return len(ts) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Where NVML gives no event set (some vGPU and driver setups), Run keeps
// probing: a GPU that stops answering is still tainted.
func TestProbesWithoutAnEventSet(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	uuids := gpuUUIDs(t, lib)
	m := health.New(lib, uuids, health.Options{Policy: config.Default().Health, ProbeInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	lib.SetLost(5, true)
	deadline := time.After(5 * time.Second)
	for m.Taints()[uuids[5]].Value != "lost" {
		select {
		case err := <-done:
			t.Fatalf("Run ended without an event set: %v", err)
		case <-deadline:
			t.Fatalf("lost GPU not tainted: taints %v", m.Taints())
		case <-m.Changed():
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// After a GPU falls off the bus NVML's event wait fails at once, every
// time, while that GPU is registered. The monitor watches the other GPUs
// without it, so their Xids still taint them and it does not spin a core
// until the node reboots.
func TestLostGPULeavesTheOthersWatched(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	uuids := gpuUUIDs(t, lib)
	m := health.New(lib, uuids, health.Options{Policy: config.Default().Health, ProbeInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for !lib.Registered(5) {
		time.Sleep(time.Millisecond)
	}
	lib.SetLost(2, true)
	time.Sleep(time.Second)
	waits := lib.EventWaits()
	lib.InjectXid(5, 48)
	deadline := time.Now().Add(5 * time.Second)
	for m.Taints()[uuids[5]].Value != "xid-48" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if taint := m.Taints()[uuids[2]]; taint.Value != "lost" {
		t.Errorf("lost GPU's taint %+v, want lost", taint)
	}
	if taint := m.Taints()[uuids[5]]; taint.Value != "xid-48" {
		t.Errorf("GPU 5's taint %+v after its Xid 48 while GPU 2 is lost, want xid-48", taint)
	}
	if waits > 20 {
		t.Errorf("%d event waits in about a second with a lost GPU, want a 200ms wait each", waits)
	}
}

// NVML gives an event set at start but none when a GPU lost and the set
// is made again: the monitor probes only from then on, and stops
// cleanly (it freed a set it no longer had, and the agent crashed).
func TestEventSetGoneAfterAGPUIsLost(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	create := lib.EventSetCreateFunc
	var sets atomic.Int32
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		if sets.Add(1) > 1 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return create()
	}
	uuids := gpuUUIDs(t, lib)
	m := health.New(lib, uuids, health.Options{Policy: config.Default().Health, ProbeInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("Run panicked: %v", r)
			}
		}()
		done <- m.Run(ctx)
	}()
	for !lib.Registered(5) {
		time.Sleep(time.Millisecond)
	}
	lib.SetLost(2, true)
	for sets.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // probing only
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if taint := m.Taints()[uuids[2]]; taint.Value != "lost" {
		t.Errorf("lost GPU's taint %+v, want lost", taint)
	}
}

// NVML's event wait says a GPU is lost while every watched GPU still
// answers the probe: the monitor waits between tries instead of spinning
// a core.
func TestLostWaitWhileEveryGPUAnswers(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	create := lib.EventSetCreateFunc
	var waits atomic.Int32
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set, ret := create()
		if ret != nvml.SUCCESS {
			return set, ret
		}
		ms := set.(*mock.EventSet)
		ms.WaitFunc = func(uint32) (nvml.EventData, nvml.Return) {
			waits.Add(1)
			return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
		}
		return ms, nvml.SUCCESS
	}
	m := health.New(lib, gpuUUIDs(t, lib), health.Options{Policy: config.Default().Health, ProbeInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	time.Sleep(time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := waits.Load(); n > 5 {
		t.Errorf("%d event waits in a second, want a pause after each", n)
	}
}

// A GPU that delivers no Xid events is said at the default verbosity,
// once, though the event set is made again after every lost GPU: such a
// GPU is watched by probes only, which find no Xid.
func TestGPUWithoutXidEventsSaidOnce(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	lib.Devices[3].(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	uuids := gpuUUIDs(t, lib)
	var mu sync.Mutex
	said := 0
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, "No Xid events from GPU") && strings.Contains(args, uuids[3]) {
			mu.Lock()
			said++
			mu.Unlock()
		}
	}, funcr.Options{}) // verbosity 0: what the DaemonSet logs
	m := health.New(lib, uuids, health.Options{Policy: config.Default().Health, ProbeInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for !lib.Registered(5) {
		time.Sleep(time.Millisecond)
	}
	lib.SetLost(2, true) // the set is made again
	for m.Taints()[uuids[2]].Value != "lost" {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if said != 1 {
		t.Errorf("GPU 3 without Xid events said %d times at verbosity 0, want once", said)
	}
}
