package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/sim"
)

// An interrupted table keeps the replays that finished, and says where.
func TestKeepFinishedWritesTheFinishedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.csv")
	runs := []sim.Run{{Trace: "default", Seed: 1, Target: "gputopo", Unallocated: 4.43, Pods: 10, Placed: 9}, {}, {Trace: "default", Seed: 2, Target: "gputopo", Unallocated: 4.52}}
	err := keepFinished(path, runs, context.Canceled)
	if err == nil || !strings.Contains(err.Error(), "context canceled (the 2 replays that finished are in "+path+")") {
		t.Errorf("error %v, want the cause and where the 2 finished runs are", err)
	}
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "default,1,gputopo,4.43") || !strings.HasPrefix(lines[2], "default,2,gputopo,4.52") {
		t.Errorf("runs.csv:\n%s\nwant a header and the two finished runs", data)
	}
	if err := keepFinished(filepath.Join(t.TempDir(), "none.csv"), []sim.Run{{}}, context.Canceled); err != context.Canceled {
		t.Errorf("nothing finished: error %v, want the cause alone", err)
	}
}

// The header counts the nodes replayed: a sample, or the whole fleet when
// --nodes is 0 or past it.
func TestNodeCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "all 1213"}, {5000, "all 1213"}, {300, "300 of the 1213"}} {
		if got, err := nodeCount(openb.Embedded(), tc.n); err != nil || got != tc.want {
			t.Errorf("nodeCount(%d) = %q, %v; want %q", tc.n, got, err, tc.want)
		}
	}
}
