package mocknvml

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// topology is what the go-nvml mocks leave out about how GPUs connect.
type topology struct {
	links   int                 // active NVLink links per GPU
	version nvml.NvlinkVersion  // as NVML reports it: a code, not the generation
	linked  func(i, j int) bool // NVLink peer-to-peer between GPUs i and j
	numa    func(i int) int
	product string // overrides the mock's product name
	fabric  *fabric
}

// nvswitchPCIDeviceID is the PCI device and vendor ID NVML reports at the
// far end of a link to an NVSwitch.
const nvswitchPCIDeviceID = 0x22a310de

type fabric struct {
	clique uint32
	// pending: the fabric manager has not finished setting the fabric
	// up (a tray booting), so NVML reports it in progress, without a
	// clique.
	pending atomic.Bool
	// unreadable: NVML fails to read the fabric (a GPU resetting).
	unreadable atomic.Bool
	// mu guards what NVML reports once the fabric is set up: the
	// cluster (the rack), or an error.
	mu      sync.Mutex
	cluster [16]byte
	failed  bool
}

// info is the fabric as NVML's GetGpuFabricInfo reports it.
func (f *fabric) info() nvml.GpuFabricInfo {
	if f.pending.Load() {
		return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_IN_PROGRESS, Status: uint32(nvml.ERROR_UNKNOWN)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.ERROR_UNKNOWN)}
	}
	return nvml.GpuFabricInfo{ClusterUuid: f.cluster, CliqueId: f.clique,
		State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.SUCCESS)}
}

// nvswitch: every GPU reaches every other through NVSwitch; GPUs 0-3 on
// NUMA node 0, 4-7 on NUMA node 1.
func nvswitch(links int, version nvml.NvlinkVersion) topology {
	return topology{links: links, version: version,
		linked: func(i, j int) bool { return true },
		numa:   func(i int) int { return i / 4 }}
}

func (t topology) wire(s *server.Server) {
	index := map[nvml.Device]int{}
	for i, d := range s.Devices {
		index[d] = i
	}
	pciOf := make([]nvml.PciInfo, len(s.Devices))
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		// The mocks leave the bus ID out; NVML pads the domain to 8 digits.
		p := nvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId, Bus: uint32(i)}
		for k, c := range "0000" + strings.ToUpper(dev.PciBusID) {
			p.BusId[k] = int8(c)
		}
		pciOf[i] = p
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= t.links {
				return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		dev.GetNvLinkVersionFunc = func(l int) (uint32, nvml.Return) {
			if l >= t.links {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(t.version), nvml.SUCCESS
		}
		// A link ends at the peer of a bridged pair, or at an NVSwitch
		// (which NVML reports with the switch's PCI info; bus 0xff here).
		var bridged []int
		for j := range s.Devices {
			if j != i && t.linked(i, j) {
				bridged = append(bridged, j)
			}
		}
		dev.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			if l >= t.links {
				return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
			}
			if len(bridged) == 1 && t.fabric == nil {
				return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
			}
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
		dev.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			if l >= t.links {
				return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
			}
			if len(bridged) == 1 && t.fabric == nil {
				return pciOf[bridged[0]], nvml.SUCCESS
			}
			return nvml.PciInfo{Bus: 0xff, PciDeviceId: nvswitchPCIDeviceID}, nvml.SUCCESS
		}
		dev.GetP2PStatusFunc = func(other nvml.Device, caps nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			j, ok := index[other]
			if !ok {
				return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
			}
			if caps == nvml.P2P_CAPS_INDEX_NVLINK && !t.linked(i, j) {
				return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return t.numa(i), nvml.SUCCESS }
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pciOf[i], nvml.SUCCESS }
		if t.product != "" {
			dev.GetNameFunc = func() (string, nvml.Return) { return t.product, nvml.SUCCESS }
		}
		dev.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
			if t.fabric == nil {
				return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, nvml.ERROR_NOT_SUPPORTED
			}
			if t.fabric.unreadable.Load() {
				return nvml.GpuFabricInfo{}, nvml.ERROR_UNKNOWN
			}
			return t.fabric.info(), nvml.SUCCESS
		}
	}
}
