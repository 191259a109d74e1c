package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/replay"
)

// checkEveryRead makes every ledger of the test compare each answer with
// upstream's.
func checkEveryRead(t *testing.T) {
	t.Helper()
	old := ledgerCheckEvery
	ledgerCheckEvery = 1
	t.Cleanup(func() { ledgerCheckEvery = old })
}

// gputopoTarget is the replay target of gputopo's profile.
func gputopoTarget(t *testing.T) replay.Target {
	t.Helper()
	for _, target := range targets {
		if target.Name == "gputopo" {
			return target
		}
	}
	t.Fatal("no gputopo target")
	return replay.Target{}
}

// The replay's ledger gives gputopo's plugins exactly what upstream's
// claim tracker would, read by read: on the openb traces (whole GPUs and
// shares of them, CPU-only pods) and on churn streams whose jobs leave
// (claims deleted), on whole, MIG and shared fleets. A replay stops at
// the first difference, so each finishing is the check.
func TestLedgerAnswersAsUpstreamDoes(t *testing.T) {
	checkEveryRead(t)
	ctx, cfg := shippedConfig(t)
	target := gputopoTarget(t)
	all, err := openb.LoadNodes(openb.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	nodes := openb.SampleNodes(all, 30)
	for _, trace := range []string{"default", "gpushare100", "multigpu50"} {
		pods, err := openb.LoadPods(openb.Embedded(), trace)
		if err != nil {
			t.Fatal(err)
		}
		arrivals := openb.ArrivalsUntil(openb.Inflate(pods, nodes, openb.DefaultInflation, 1), openb.CapacityMilli(nodes), 100)
		out, err := RunOpenB(ctx, cfg, target, nodes, arrivals)
		if err != nil {
			t.Fatalf("%s: %v", trace, err)
		}
		t.Logf("%s: %d of %d pods placed, every read compared", trace, out.Tracker.PodsPlaced(), len(arrivals))
	}
	for _, st := range ChurnStreams {
		run, err := RunChurn(ctx, cfg, st, 1, target)
		if err != nil {
			t.Fatalf("%s: %v", st.Name, err)
		}
		t.Logf("%s: %d of %d jobs served, every read compared", st.Name, run.Served, st.Jobs)
	}
}

// The comparison can fail: an allocation put in flight behind the
// ledger's back (upstream's tracker told directly) is one the ledger
// does not count, and the next read reports it; told through the ledger,
// it is counted.
func TestLedgerReportsWhatItMisses(t *testing.T) {
	checkEveryRead(t)
	ctx, cfg := shippedConfig(t)
	client := NewClient()
	if err := fleet.CreateDeviceClasses(ctx, client); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if len(s.ledgers.all) != 1 {
		t.Fatalf("%d ledgers, want one (one scheduler, one DRA manager)", len(s.ledgers.all))
	}
	l := s.ledgers.all[0]
	// A claim in the scheduler's cache, and the allocation a plugin
	// would put in flight for it.
	claim := func(uid, device string) *resourceapi.ResourceClaim {
		t.Helper()
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
		if _, err := client.ResourceV1().ResourceClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			_, err := l.Get(c.Namespace, c.Name)
			return err == nil, nil
		}); err != nil {
			t.Fatalf("claim %s not in the scheduler's cache: %v", uid, err)
		}
		c = c.DeepCopy()
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: "gpu.example.com", Pool: "node-0", Device: device}}}}
		return c
	}

	through := claim("through", "gpu-0")
	if err := l.SignalClaimPendingAllocation(through.UID, through); err != nil {
		t.Fatal(err)
	}
	state, err := l.GatherAllocatedState()
	if err != nil || l.Err() != nil {
		t.Fatalf("allocation signalled through the ledger: %v, %v", err, l.Err())
	}
	if state.AllocatedDevices.Len() != 1 {
		t.Errorf("allocated devices %v, want the in-flight gpu-0", state.AllocatedDevices.UnsortedList())
	}

	behind := claim("behind", "gpu-1")
	if err := l.ResourceClaimTracker.SignalClaimPendingAllocation(behind.UID, behind); err != nil {
		t.Fatal(err)
	}
	if _, err := l.GatherAllocatedState(); err != nil {
		t.Fatal(err)
	}
	if err := s.ledgers.err(); err == nil || !strings.Contains(err.Error(), "gpu-1") || !strings.Contains(err.Error(), "1 missing") {
		t.Errorf("allocation signalled behind the ledger: error %v, want gpu-1 reported missing", err)
	}
}
