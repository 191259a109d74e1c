package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeSysfs lays out sysfs under root as Linux does: each PCI device in
// sys/devices/<its PCIe root>/..., linked from sys/bus/pci/devices, with
// its numa_node.
func fakeSysfs(t *testing.T, root string, numaNodes map[string]string) {
	t.Helper()
	links := filepath.Join(root, "sys", "bus", "pci", "devices")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	for bus, value := range numaNodes {
		dir := filepath.Join(root, "sys", "devices", "pci0000:"+bus[5:7], "0000:00:01.0", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(value), 0o644); err != nil {
			t.Fatal(err)
		}
		target, err := filepath.Rel(links, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(links, bus)); err != nil {
			t.Fatal(err)
		}
	}
}

// SysfsPCIeRoot and SysfsNUMANode read one sysfs layout under one root
// (--sysfs-root): the PCIe root of the device's path, and its numa_node:
// a node, -1 for none, an error for a device sysfs does not have or a
// value that is no node.
func TestSysfsReaders(t *testing.T) {
	root := t.TempDir()
	fakeSysfs(t, root, map[string]string{"0000:07:00.0": "1\n", "0000:0f:00.0": "-1\n", "0000:47:00.0": "x\n"})
	if got, err := SysfsPCIeRoot(root)("0000:07:00.0"); err != nil || got != "pci0000:07" {
		t.Errorf("PCIe root of 0000:07:00.0: %q, %v; want pci0000:07", got, err)
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
