package openb

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// traceFS is the trace the tests read: the copy shipped with gputopo.
func traceFS(t *testing.T) fs.FS {
	t.Helper()
	return Embedded()
}

// originalDir finds a folder with the trace's original files:
// $GPUTOPO_OPENB_DIR, else shared/traces/openb in the working directory
// or one of its parents; "" when there is none.
func originalDir(t *testing.T) string {
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
			return ""
		}
	}
}

// The shipped copy holds the original files byte for byte, and a folder
// of original files reads as the embedded copy does.
func TestEmbeddedTraceIsTheOriginal(t *testing.T) {
	dir := originalDir(t)
	if dir == "" {
		t.Skip("no original openb files next to the repository to compare with")
	}
	names := []string{NodeFile}
	entries, err := fs.ReadDir(Embedded(), ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if name := e.Name(); name != NodeFile+".gz" {
			names = append(names, name[:len(name)-len(".gz")])
		}
	}
	if len(names) < 2 {
		t.Fatalf("embedded files %v: want the node list and pod lists", names)
	}
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := openFile(Embedded(), name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: embedded copy (%d bytes) differs from %s (%d bytes)", name, len(got), dir, len(want))
		}
	}
	fromDir, err := LoadPods(os.DirFS(dir), "default")
	if err != nil {
		t.Fatal(err)
	}
	fromEmbedded, err := LoadPods(Embedded(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(fromDir) != len(fromEmbedded) || fromDir[0].Name != fromEmbedded[0].Name {
		t.Errorf("default pods: %d from the folder, %d embedded", len(fromDir), len(fromEmbedded))
	}
}
