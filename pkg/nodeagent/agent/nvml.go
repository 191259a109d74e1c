package agent

import (
	"fmt"
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

// SysfsPCIeRoot reads a GPU's PCIe root complex from sysfs under root
// ("/" on a node, the host's /sys mounted elsewhere in a container).
func SysfsPCIeRoot(root string) func(busID string) (string, error) {
	return func(busID string) (string, error) {
		a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(busID, deviceattribute.WithFSFromRoot(root))
		if err != nil {
			return "", err
		}
		if a.Value.StringValue == nil {
			return "", fmt.Errorf("no PCIe root for %s", busID)
		}
		return *a.Value.StringValue, nil
	}
}
