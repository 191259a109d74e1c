// Package contract names what the node agent publishes and the scheduler,
// demo and tests read: the driver's default name, device attributes,
// capacities, device types and the DeviceClasses the manifests ship. Each
// name is defined here once; docs/attributes.md says what each means.
//
// Unqualified attribute names live in the driver's domain
// (device.attributes['gpu.nvidia.com'].memory). The standard
// resource.kubernetes.io attributes are upstream's constants
// (k8s.io/dynamic-resource-allocation/deviceattribute). The package
// imports only the standard library, so every part of gputopo may use it.
package contract

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultDriver is the driver name the node agent publishes under unless
// configured otherwise: NVIDIA's DRA driver's, so that its DeviceClasses
// and claims keep working.
const DefaultDriver = "gpu.nvidia.com"

// Attributes of every device.
const (
	AttrType                  = "type"
	AttrIndex                 = "index"
	AttrProductName           = "productName"
	AttrArchitecture          = "architecture"
	AttrCUDAComputeCapability = "cudaComputeCapability"
	AttrDriverVersion         = "driverVersion"
	AttrMemory                = "memory" // MiB
)

// Attributes of whole GPUs.
const (
	AttrUUID            = "uuid"
	AttrNVLinkDomain    = "nvlinkDomain"
	AttrNVLinkLinks     = "nvlinkLinks"
	AttrNVLinkBandwidth = "nvlinkBandwidth" // GB/s
	AttrNVSwitch        = "nvswitch"
	AttrCliqueID        = "cliqueID"
	// AttrPCIeSwitch is read by the topology model when a driver
	// publishes it; gputopo's node agent does not yet.
	AttrPCIeSwitch = "pcieSwitch"
)

// Attributes of MIG partitions.
const (
	AttrParentUUID    = "parentUUID"
	AttrProfile       = "profile"
	AttrPartitionSize = "partitionSize"
	AttrPlacement     = "placement"
)

// Driver-domain forms of standard attributes, accepted from drivers that
// publish them there instead of under resource.kubernetes.io.
const (
	AttrPCIeRootInDriverDomain = "pcieRoot"
	AttrNUMANodeInDriverDomain = "numaNode"
)

// Values of AttrType.
const (
	TypeGPU = "gpu"
	TypeMIG = "mig"
)

// Capacities.
const (
	CapacityMemory          = "memory" // bytes
	CapacityCompute         = "compute"
	CapacityMultiprocessors = "multiprocessors"
)

// ShareMemoryUnit is the unit of a share's memory limit as the node agent
// sets it (MPS takes megabytes): a share's memory capacity, in bytes, is
// a whole number of these.
const ShareMemoryUnit = 1 << 20

// SharedComputePercent is the compute capacity of a shared GPU: its
// shares ask for a percent of its SMs.
const SharedComputePercent = 100

// DeviceClasses of manifests/scheduler/deviceclasses.
const (
	ClassGPU       = "gpu.nvidia.com"
	ClassMIG       = "mig.nvidia.com"
	ClassSharedGPU = "shared.gpu.nvidia.com"
)

// CounterCompute counts a MIG GPU's compute slices in its counter set
// (KEP-4815); besides it, one counter per memory slice
// (MemorySliceCounter) makes overlapping placements exclude each other.
const CounterCompute = "compute"

// MemorySliceCounter names the counter of memory slice i (memory0 …
// memory7).
func MemorySliceCounter(i int) string { return "memory" + strconv.Itoa(i) }

// IsMemorySliceCounter reports whether a counter is one of
// MemorySliceCounter's, or of NVIDIA's DRA driver, which names them
// memory-slice-0 … memory-slice-7.
func IsMemorySliceCounter(name string) bool {
	digits, ok := strings.CutPrefix(name, "memory-slice-")
	if !ok {
		digits, ok = strings.CutPrefix(name, "memory")
	}
	if !ok || digits == "" {
		return false
	}
	_, err := strconv.Atoi(digits)
	return err == nil
}

// LabelClique is the node label that names the multi-node NVLink clique
// of the node's GPUs (NVIDIA's GPU feature discovery label): the node
// agent writes it when asked to, the pod-group placement plugin falls
// back to it for drivers that publish no cliqueID, and a PodGroup names
// it as its topology key to ask for one clique.
const LabelClique = "nvidia.com/gpu.clique"

// ExtendedResourceGPU is the extended resource NVIDIA's device plugin
// advertises for each GPU of a node, and that the extended-resource
// overlay maps to the whole-GPU class.
const ExtendedResourceGPU = "nvidia.com/gpu"

// PlacementAnnotation on a claim gputopo allocated says which devices the
// scheduler chose and why; kubectl gputopo why shows it.
const PlacementAnnotation = "gputopo.io/placement"

// ExtendedRequestName names the request of a pod's extended-resource
// claim (KEP-5004) for resource j of container i, as kube-scheduler names
// it: i indexes init containers then containers, j the resource among the
// container's sorted resource names. The kubelet gives each container the
// devices of the requests its mappings name; the node agent groups a
// claim's GPUs by the container whose request they serve.
func ExtendedRequestName(i, j int) string { return fmt.Sprintf("container-%d-request-%d", i, j) }

// ExtendedRequestContainer is the container index i of an
// ExtendedRequestName, and false for any other name.
func ExtendedRequestContainer(request string) (int, bool) {
	var i, j int
	if n, err := fmt.Sscanf(request, "container-%d-request-%d", &i, &j); err != nil || n != 2 || i < 0 || j < 0 || ExtendedRequestName(i, j) != request {
		return 0, false
	}
	return i, true
}
