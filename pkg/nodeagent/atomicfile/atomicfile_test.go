package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Write creates the directory, replaces the file and leaves no
// temporary file behind.
func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	for _, content := range []string{"first", "second"} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(entries) != 1 {
		t.Errorf("directory holds %v (%v), want only the file", entries, err)
	}
}

// Read removes the temporary files of writes a kill interrupted, and
// only those of its file.
func TestReadRemovesInterruptedWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	if err := Write(path, []byte("content")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"checkpoint.json.tmp-123", "checkpoint.json.tmp-456", "health.json.tmp-1", "other"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path)
	if err != nil || string(got) != "content" {
		t.Fatalf("read %q, %v; want the file's content", got, err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := "checkpoint.json health.json.tmp-1 other"; strings.Join(left, " ") != want {
		t.Errorf("directory holds %v, want %s", left, want)
	}
}
