package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// OpenNVML returns the NVML the agent reads: "real" loads the driver's
// libnvidia-ml.so.1 at run time (the error says so when it is absent);
// "mock:<shape>" is one of go-nvml's mock servers wired by mocknvml.
func OpenNVML(source string, mock mocknvml.Options) (nvml.Interface, error) {
	if source == "real" {
		return nvml.New(), nil
	}
	shape, ok := strings.CutPrefix(source, "mock:")
	if !ok {
		return nil, fmt.Errorf("--nvml=%q: want \"real\" or \"mock:<shape>\" with a shape of %v", source, mocknvml.Shapes)
	}
	s, err := mocknvml.ParseShape(shape)
	if err != nil {
		return nil, fmt.Errorf("--nvml: %w", err)
	}
	return mocknvml.NewWith(s, mock)
}

// SysfsPCIeRoot reads a GPU's PCIe root complex from sysfs, found at
// root/sys ("/" on a node; the host's root mounted elsewhere in a
// container). The reader wants the sysfs directory itself: given root
// (as it was), it looked for /bus/pci/devices and never found a PCIe
// root on a real node.
func SysfsPCIeRoot(root string) func(busID string) (string, error) {
	sysfs := deviceattribute.WithFSFromRoot(filepath.Join(root, "sys"))
	return func(busID string) (string, error) {
		a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(busID, sysfs)
		if err != nil {
			return "", err
		}
		if a.Value.StringValue == nil {
			return "", fmt.Errorf("no PCIe root for %s", busID)
		}
		return *a.Value.StringValue, nil
	}
}

// SysfsNUMANode reads a GPU's NUMA node from sysfs at root/sys: the node of
// the CPUs the PCI device is attached to, -1 where there is none (one
// socket, many VMs), as the standard numaNode attribute means it.
func SysfsNUMANode(root string) func(busID string) (int, error) {
	return func(busID string) (int, error) {
		raw, err := os.ReadFile(filepath.Join(root, "sys", "bus", "pci", "devices", busID, "numa_node"))
		if err != nil {
			return -1, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || n < -1 {
			return -1, fmt.Errorf("numa_node of %s: %q is not a NUMA node", busID, strings.TrimSpace(string(raw)))
		}
		return n, nil
	}
}
