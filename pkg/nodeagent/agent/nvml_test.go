package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// SysfsNUMANode reads the PCI device's numa_node: a node, -1 for none,
// an error for a device sysfs does not have or a value that is no node.
func TestSysfsNUMANode(t *testing.T) {
	root := t.TempDir()
	for bus, value := range map[string]string{"0000:07:00.0": "1\n", "0000:0f:00.0": "-1\n", "0000:47:00.0": "x\n"} {
		dir := filepath.Join(root, "sys", "bus", "pci", "devices", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(value), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	numa := SysfsNUMANode(root)
	for _, tc := range []struct {
		bus     string
		want    int
		wantErr bool
	}{
		{"0000:07:00.0", 1, false},
		{"0000:0f:00.0", -1, false},
		{"0000:47:00.0", -1, true},
		{"0000:87:00.0", -1, true},
	} {
		got, err := numa(tc.bus)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: %d, %v; want %d, error %v", tc.bus, got, err, tc.want, tc.wantErr)
		}
	}
}
