package topology

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

func TestLearnerStartsFromThePriorAndFollowsArrivals(t *testing.T) {
	prior := Workload{{GPUs: 1, Share: 1, Weight: 1}}
	l := NewLearner(prior, 10, 4)
	if w := l.Workload(); len(w) != 1 || w[0].Weight != 10 {
		t.Fatalf("before any arrival: %+v, want the prior worth 10 requests", w)
	}
	for range 30 {
		l.Observe(TaskClass{GPUs: 8, Share: 1, CPUMilli: 64500, MemoryMiB: 1000}, "")
	}
	w := l.Workload()
	if len(w) != 2 {
		t.Fatalf("classes %+v, want the prior and one learned", w)
	}
	if got := w[0]; got.GPUs != 8 || got.Weight != 30 || got.CPUMilli != 65000 || got.MemoryMiB != 1024 {
		t.Errorf("heaviest class %+v, want 8 GPUs seen 30 times, CPU and memory rounded up", got)
	}
}

func TestLearnerMergesSharesToOnePercentAndKeepsTheHeaviest(t *testing.T) {
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 1, 2)
	for range 5 {
		l.Observe(TaskClass{GPUs: 1, Share: 0.251}, "")
		l.Observe(TaskClass{GPUs: 1, Share: 0.26}, "")
	}
	l.Observe(TaskClass{GPUs: 2, Share: 1}, "")
	w := l.Workload()
	if len(w) != 2 || w[0].Share != 0.26 || w[0].Weight != 10 {
		t.Fatalf("classes %+v, want 10 shares of 0.26 first, and only 2 classes", w)
	}
}

func TestLearnerIgnoresInvalidRequests(t *testing.T) {
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 1, 8)
	for _, c := range []TaskClass{{GPUs: 0, Share: 1}, {GPUs: 1, Share: 0}, {GPUs: 1, Share: 1.5}, {GPUs: 2, Share: 0.5}} {
		l.Observe(c, "")
	}
	if w := l.Workload(); len(w) != 1 {
		t.Errorf("classes %+v, want only the prior", w)
	}
	if err := l.Workload().Validate(); err != nil {
		t.Errorf("learned workload invalid: %v", err)
	}
}

func TestLearnerPlacements(t *testing.T) {
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 20, 2)
	for range 6 {
		l.Observe(TaskClass{GPUs: 1, Share: 1}, "t4")
	}
	l.Observe(TaskClass{GPUs: 1, Share: 0.5}, "v100")
	l.Observe(TaskClass{GPUs: 1, Share: 0.5}, "a10")
	l.Observe(TaskClass{GPUs: 0, Share: 1}, "ignored")
	// 8 requests seen and the prior's 2 (a tenth of 20), unconstrained.
	_, where := l.Estimate()
	want := []Placement{{Key: "t4", Share: 0.6}, {Key: "a10", Share: 0.1}}
	if len(where) != len(want) || where[0] != want[0] || where[1] != want[1] {
		t.Errorf("placements %+v, want %+v: constrained keys only, shares of all requests and the prior, the 2 heaviest, invalid requests ignored", where, want)
	}
}

// TestLearnerPlacementsBounded: pods pinned to one node each do not grow
// the learner for ever; the folded ones count as unconstrained.
func TestLearnerPlacementsBounded(t *testing.T) {
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 0, 4)
	for range 3 {
		l.Observe(TaskClass{GPUs: 1, Share: 1}, "pool-a")
	}
	for i := range 1000 {
		l.Observe(TaskClass{GPUs: 1, Share: 1}, fmt.Sprintf("node-%d", i))
	}
	if n := len(l.placements); n > 4*4+1 {
		t.Errorf("%d placement keys remembered, want at most 17", n)
	}
	_, where := l.Estimate()
	if len(where) == 0 || where[0].Key != "pool-a" || math.Abs(where[0].Share-3.0/1003) > 1e-9 {
		t.Errorf("placements %+v, want pool-a first with 3 of 1003 requests", where)
	}
}

// TestLearnerClassesBounded: pods sized one by one (a vertical
// autoscaler's requests) do not grow the learner for ever; the heaviest
// classes stay in the estimate.
func TestLearnerClassesBounded(t *testing.T) {
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 0, 4)
	heavy := TaskClass{GPUs: 8, Share: 1, CPUMilli: 96000, MemoryMiB: 1 << 20}
	for i := range 1000 {
		l.Observe(heavy, "")
		l.Observe(TaskClass{GPUs: 1, Share: 1, CPUMilli: int64(i) * 1000}, "")
	}
	if n := len(l.counts); n > 16*4 {
		t.Errorf("%d classes counted, want at most 64", n)
	}
	if w := l.Workload(); len(w) == 0 || w[0].GPUs != 8 || w[0].Weight != 1000 {
		t.Errorf("estimate %+v, want the 8-GPU class first, seen 1000 times", w)
	}
	// A request whose class was dropped since is still taken back whole.
	dropped := TaskClass{GPUs: 1, Share: 1, CPUMilli: 500 * 1000}
	if _, kept := l.counts[dropped]; kept {
		t.Fatalf("class %+v still counted", dropped)
	}
	observed, constrained := l.Observed(), l.placements["zone=a"]
	l.placements["zone=a"]++ // as if it had been observed with a key
	l.Forget(dropped, "zone=a")
	if l.Observed() != observed-1 || l.placements["zone=a"] != constrained {
		t.Errorf("after taking back a request of a dropped class: %v observed, zone=a %v; want %v, %v", l.Observed(), l.placements["zone=a"], observed-1, constrained)
	}
}

// TestLearnerForget: a request taken back leaves the estimate as if it
// never came, also when its placement key was folded into the
// unconstrained count meanwhile; one never counted changes nothing.
func TestLearnerForget(t *testing.T) {
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 10, 1)
	l.Observe(TaskClass{GPUs: 2, Share: 1}, "a100")
	w, where := l.Estimate()
	l.Observe(TaskClass{GPUs: 1, Share: 0.5, CPUMilli: 1500}, "t4")
	l.Forget(TaskClass{GPUs: 1, Share: 0.5, CPUMilli: 1200}, "t4") // counted in the same class
	l.Forget(TaskClass{GPUs: 4, Share: 1}, "")                     // never counted
	if got, gotWhere := l.Estimate(); !reflect.DeepEqual(got, w) || !reflect.DeepEqual(gotWhere, where) {
		t.Errorf("after taking back the t4 request: %v %v, want %v %v", got, gotWhere, w, where)
	}
	for range 3 {
		l.Observe(TaskClass{GPUs: 1, Share: 1}, "heavy")
	}
	for i := range 8 { // keys beyond 4 x 1 fold all but heavy away
		l.Observe(TaskClass{GPUs: 1, Share: 1}, fmt.Sprintf("node-%d", i))
	}
	if _, kept := l.placements["a100"]; kept {
		t.Fatalf("placements %v: a100 not folded away", l.placements)
	}
	l.Forget(TaskClass{GPUs: 2, Share: 1}, "a100")
	if l.Observed() != 11 || l.counts[TaskClass{GPUs: 2, Share: 1}] != 0 {
		t.Errorf("observed %v, 2-GPU count %v after taking back the folded a100 request: want 11 and 0", l.Observed(), l.counts[TaskClass{GPUs: 2, Share: 1}])
	}
	var total float64
	for _, n := range l.placements {
		total += n
	}
	if total != 11 {
		t.Errorf("placement counts add up to %v, want the 11 requests left", total)
	}
}
