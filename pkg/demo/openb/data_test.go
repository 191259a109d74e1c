package openb

import (
	"os"
	"path/filepath"
	"testing"
)

// traceDir finds the openb trace: $GPUTOPO_OPENB_DIR, else shared/traces/openb
// in the working directory or one of its parents (the workspace keeps the
// data next to the repository, not in it). Without the data the test skips,
// unless GPUTOPO_REQUIRE_OPENB=1 makes that a failure.
func traceDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("GPUTOPO_OPENB_DIR"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "shared", "traces", "openb")
		if _, err := os.Stat(filepath.Join(c, NodeFile)); err == nil {
			return c
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	msg := "openb trace not found: set GPUTOPO_OPENB_DIR or put it in shared/traces/openb"
	if os.Getenv("GPUTOPO_REQUIRE_OPENB") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
