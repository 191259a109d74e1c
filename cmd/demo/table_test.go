package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
