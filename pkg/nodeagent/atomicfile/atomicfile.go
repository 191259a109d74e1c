// Package atomicfile replaces a file so that a crash leaves either the
// old content or the new, never a mix: the node agent's checkpoint and
// health state are read back after restarts and reboots.
package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
)

// Write replaces path with data: a temporary file in the same
// directory, synced and renamed over path, then the directory synced.
// The directory is created if missing.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Read reads a file Write wrote, and removes the temporary files of
// writes a kill interrupted (the agent's memory limit makes that
// plausible): nothing else removes them, and each crash would leave one
// more. Only one writer may use path, as one agent runs per node.
func Read(path string) ([]byte, error) {
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), globEscape(filepath.Base(path))+".tmp-*"))
	for _, f := range leftovers {
		_ = os.Remove(f) // best effort: a leftover only takes room
	}
	return os.ReadFile(path)
}

// globEscape escapes the pattern characters of a file name.
func globEscape(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
