package main

import (
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
