package openb

import (
	"math"
	"testing"
)

func TestTrackerAt(t *testing.T) {
	// Capacity 1,000 milli. Outcomes (arrived %, unallocated %):
	// a 400 placed -> (40, 60); cpu placed -> (40, 60);
	// b 400 rejected -> (80, 60); c 400 placed -> (120, 20).
	tr := NewTracker(1000)
	steps := []struct {
		pod    Pod
		placed bool
	}{
		{Pod{Name: "a", NumGPU: 1, GPUMilli: 400}, true},
		{Pod{Name: "cpu"}, true},
		{Pod{Name: "b", NumGPU: 1, GPUMilli: 400}, false},
		{Pod{Name: "c", NumGPU: 1, GPUMilli: 400}, true},
	}
	for _, s := range steps {
		tr.Arrive(s.pod)
		if s.placed {
			tr.Placed(s.pod, s.pod.GPUMilliRequest())
		} else {
			tr.Rejected(s.pod)
		}
	}
	if got, want := tr.Points(), []Point{{40, 60}, {40, 60}, {80, 60}, {120, 20}}; !pointsNear(got, want) {
		t.Fatalf("Points = %v, want %v", got, want)
	}
	if tr.PodsPlaced() != 3 || tr.PodsRejected() != 1 {
		t.Errorf("placed/rejected = %d/%d, want 3/1", tr.PodsPlaced(), tr.PodsRejected())
	}
	tests := []struct {
		arrived float64
		want    float64
		ok      bool
	}{
		{0, 100, true},
		{20, 80, true},  // between the implicit origin and (40, 60)
		{40, 60, true},  // exactly on a point
		{60, 60, true},  // flat while b is rejected
		{100, 40, true}, // halfway from (80, 60) to (120, 20)
		{120, 20, true},
		{130, 20, false}, // past the run: last value, not reached
	}
	for _, tc := range tests {
		got, ok := tr.At(tc.arrived)
		if math.Abs(got-tc.want) > 1e-9 || ok != tc.ok {
			t.Errorf("At(%v) = %v, %v; want %v, %v", tc.arrived, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTrackerEmptyAndRounding(t *testing.T) {
	tr := NewTracker(2000)
	if got, ok := tr.At(100); got != 100 || ok {
		t.Errorf("empty At(100) = %v, %v; want 100, false", got, ok)
	}
	// A share rounded up by the scheduler allocates more than it asked.
	p := Pod{Name: "s", NumGPU: 1, GPUMilli: 300}
	tr.Arrive(p)
	tr.Placed(p, 500)
	if a, u := tr.ArrivedPercent(), tr.UnallocatedPercent(); a != 15 || u != 75 {
		t.Errorf("arrived, unallocated = %v, %v; want 15, 75", a, u)
	}
}

func TestTrackerMisusePanics(t *testing.T) {
	p := Pod{Name: "p", NumGPU: 1, GPUMilli: 1000}
	tests := []struct {
		name string
		f    func(*Tracker)
	}{
		{"outcome before arrival", func(tr *Tracker) { tr.Placed(p, 1000) }},
		{"two outcomes", func(tr *Tracker) { tr.Arrive(p); tr.Rejected(p); tr.Rejected(p) }},
		{"arrived twice", func(tr *Tracker) { tr.Arrive(p); tr.Arrive(p) }},
		{"zero capacity", func(*Tracker) { NewTracker(0) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.f(NewTracker(1000))
		})
	}
}

func pointsNear(a, b []Point) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i].ArrivedPercent-b[i].ArrivedPercent) > 1e-9 || math.Abs(a[i].UnallocatedPercent-b[i].UnallocatedPercent) > 1e-9 {
			return false
		}
	}
	return true
}
