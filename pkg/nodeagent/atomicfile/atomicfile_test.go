package atomicfile

import (
	"os"
	"path/filepath"
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
