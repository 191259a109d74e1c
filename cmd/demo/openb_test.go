package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/demo/openb"
)

// --scenario=openb needs nothing outside the repository: the trace ships
// with it, every published variant included; --openb-dir reads another
// copy and names a missing file.
func TestOpenBTraceShipsWithTheRepository(t *testing.T) {
	nodes, err := openb.LoadNodes(openbTrace(""))
	if err != nil || len(nodes) != 1213 {
		t.Fatalf("shipped node list: %d nodes, %v; want 1213", len(nodes), err)
	}
	for trace := range openb.Published {
		if pods, err := openb.LoadPods(openbTrace(""), trace); err != nil || len(pods) == 0 {
			t.Errorf("shipped trace %s: %d pods, %v", trace, len(pods), err)
		}
	}
	if _, err := openb.LoadNodes(openbTrace(t.TempDir())); err == nil || !strings.Contains(err.Error(), openb.NodeFile) {
		t.Errorf("--openb-dir without the files: %v, want an error naming %s", err, openb.NodeFile)
	}
}

// A run stopped short of 100% arrived (--until) reports its last figure
// with the arrived share it was read at, never as the 100% figure.
func TestFigureAt100(t *testing.T) {
	run := func(gpus ...int) *openb.Tracker {
		tr := openb.NewTracker(4000) // 4 GPUs
		for i, n := range gpus {
			p := openb.Pod{Name: fmt.Sprint(i), NumGPU: n}
			tr.Arrive(p)
			tr.Placed(p, p.GPUMilliRequest())
		}
		return tr
	}
	for _, tc := range []struct {
		name        string
		tracker     *openb.Tracker
		unallocated float64
		endArrived  float64
		reached     bool
	}{
		{"reached", run(1, 1, 2), 0, 0, true},
		{"stopped at 50%", run(1, 1), 50, 50, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, end, reached := figureAt100(tc.tracker)
			if u != tc.unallocated || end != tc.endArrived || reached != tc.reached {
				t.Errorf("figure %v%% at the end (%v%% arrived, reached %v); want %v%%, %v%%, %v", u, end, reached, tc.unallocated, tc.endArrived, tc.reached)
			}
		})
	}
}
