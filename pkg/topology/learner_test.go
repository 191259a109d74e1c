package topology

import "testing"

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
	l := NewLearner(Workload{{GPUs: 1, Share: 1, Weight: 1}}, 4, 2)
	for range 6 {
		l.Observe(TaskClass{GPUs: 1, Share: 1}, "t4")
	}
	l.Observe(TaskClass{GPUs: 1, Share: 0.5}, "v100")
	l.Observe(TaskClass{GPUs: 0, Share: 1}, "ignored")
	w, where := l.Estimate()
	if len(w) != 2 {
		t.Errorf("classes %+v, want 2", w)
	}
	want := []Placement{{Key: "t4", Weight: 6}, {Key: "v100", Weight: 1}}
	if len(where) != len(want) || where[0] != want[0] || where[1] != want[1] {
		t.Errorf("placements %+v, want %+v: observed ones only (not the prior), heaviest first, invalid requests ignored", where, want)
	}
	l.Observe(TaskClass{GPUs: 1, Share: 1}, "")
	l.Observe(TaskClass{GPUs: 1, Share: 1}, "")
	if _, where := l.Estimate(); len(where) != 2 || where[1].Key != "" {
		t.Errorf("placements %+v, want the 2 heaviest: t4, then unconstrained", where)
	}
}
