package health_test

import (
	"context"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

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

func TestXidAndLostGPUsTaintAndRecover(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range gpus {
		uuids = append(uuids, g.UUID)
	}
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	m := health.New(lib, uuids, health.Options{Policy: config.Default().Health, ProbeInterval: time.Millisecond, Now: clk.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	waitFor := func(what string, ok func(map[string]resources.Taint) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok(m.Taints()) {
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
	lib.InjectXid(3, 79) // fallen off the bus: NoExecute
	lib.SetLost(4, true)
	waitFor("taints", func(ts map[string]resources.Taint) bool {
		return ts[uuids[2]].Value == "xid-92" && ts[uuids[2]].Effect == resourceapi.DeviceTaintEffectNoSchedule &&
			ts[uuids[3]].Value == "xid-79" && ts[uuids[3]].Effect == resourceapi.DeviceTaintEffectNoExecute &&
			ts[uuids[4]].Value == "lost" && ts[uuids[4]].Effect == resourceapi.DeviceTaintEffectNoExecute
	})
	if _, ok := m.Taints()[uuids[1]]; ok {
		t.Error("application Xid 13 tainted GPU 1")
	}

	// The lost GPU comes back: lifted. NoSchedule after 5 quiet minutes,
	// NoExecute after 10.
	lib.SetLost(4, false)
	waitFor("lost GPU back", func(ts map[string]resources.Taint) bool { _, ok := ts[uuids[4]]; return !ok })
	clk.Add(6 * time.Minute)
	waitFor("NoSchedule lifted", func(ts map[string]resources.Taint) bool { _, ok := ts[uuids[2]]; return !ok })
	if _, ok := m.Taints()[uuids[3]]; !ok {
		t.Error("NoExecute taint lifted after 6 minutes, want 10")
	}
	clk.Add(5 * time.Minute)
	waitFor("NoExecute lifted", func(ts map[string]resources.Taint) bool { return len(ts) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
