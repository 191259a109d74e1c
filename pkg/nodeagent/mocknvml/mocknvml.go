// Package mocknvml builds go-nvml mock servers for the node shapes gputopo
// simulates, with the topology functions the mocks lack filled in: NVLink
// link state, NVLink peer-to-peer status and NUMA nodes.
package mocknvml

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Shape is a node shape the mock can take.
type Shape string

// Shapes of the mocks.
const (
	// DGXA100: 8 A100 SXM on NVSwitch (12 links each), 2 NUMA nodes.
	DGXA100 Shape = "dgxa100"
	// DGXH100: 8 H100 SXM on NVSwitch (18 links each), 2 NUMA nodes.
	DGXH100 Shape = "dgxh100"
	// PCIePairs: 8 PCIe H100 NVL in NVLink-bridged pairs (4 links), pairs
	// 0-1 on NUMA 0 and 2-3 on NUMA 1; PCI order interleaves the pairs.
	PCIePairs Shape = "pcie-pairs"
)

// New returns a mock NVML for the shape.
func New(shape Shape) (*server.Server, error) {
	switch shape {
	case DGXA100:
		s := dgxa100.New()
		wire(s, 12, func(i, j int) bool { return true }, func(i int) int { return i / 4 }, "")
		return s, nil
	case DGXH100:
		s := dgxh100.New()
		wire(s, 18, func(i, j int) bool { return true }, func(i int) int { return i / 4 }, "")
		return s, nil
	case PCIePairs:
		s := dgxh100.New()
		pair := func(i int) int { return i % 4 }
		wire(s, 4, func(i, j int) bool { return pair(i) == pair(j) }, func(i int) int { return pair(i) / 2 }, "NVIDIA H100 NVL")
		return s, nil
	}
	return nil, fmt.Errorf("unknown mock shape %q (want %s, %s or %s)", shape, DGXA100, DGXH100, PCIePairs)
}

// wire gives every GPU of the server links active NVLink links, NVLink
// peer-to-peer to the GPUs linked(i, j) says, and a NUMA node.
func wire(s *server.Server, links int, linked func(i, j int) bool, numa func(i int) int, product string) {
	index := map[nvml.Device]int{}
	for i, d := range s.Devices {
		index[d] = i
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		i := i
		dev.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= links {
				return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		dev.GetP2PStatusFunc = func(other nvml.Device, caps nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			j, ok := index[other]
			if !ok {
				return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
			}
			if caps == nvml.P2P_CAPS_INDEX_NVLINK && !linked(i, j) {
				return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return numa(i), nvml.SUCCESS }
		// The mocks leave the bus ID out; NVML pads the domain to 8 digits.
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			p := nvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId, Bus: uint32(i)}
			for k, c := range "0000" + strings.ToUpper(dev.PciBusID) {
				p.BusId[k] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		if product != "" {
			dev.GetNameFunc = func() (string, nvml.Return) { return product, nvml.SUCCESS }
		}
	}
}
