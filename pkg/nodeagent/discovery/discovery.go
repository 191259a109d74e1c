// Package discovery reads what the node agent publishes about each GPU
// through NVML: identity, memory, PCI placement, NUMA node, NVLink peers
// and the multi-node NVLink clique. It works on any nvml.Interface: the
// real library on GPU nodes, go-nvml's mock servers (see package mocknvml)
// in tests and simulation.
package discovery

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU is one physical GPU as the agent sees it.
type GPU struct {
	Index int
	// Minor is the device node's minor number: /dev/nvidia<Minor>.
	Minor        int
	UUID         string
	Product      string
	Architecture string
	// CUDAComputeCapability as "major.minor".
	CUDAComputeCapability string
	// MemoryMiB is 0 where NVML does not report it (unified memory).
	MemoryMiB int64
	PCIBusID  string
	PCIeRoot  string
	// NUMANode is -1 when it is not known (or the GPU has no NUMA
	// affinity, as on one socket).
	NUMANode      int
	DriverVersion string
	// NVLinks counts active NVLink links; NVLinkBandwidthGBps is their
	// total bidirectional bandwidth in GB/s.
	NVLinks             int
	NVLinkBandwidthGBps int64
	// NVSwitch is true when the links end at NVSwitches rather than at
	// a bridged peer GPU.
	NVSwitch bool
	// NVLinkPeers are the UUIDs of GPUs reached over NVLink (directly or
	// through NVSwitch), sorted.
	NVLinkPeers []string
	// NVLinkDomain names the set of GPUs of this node that reach each
	// other over NVLink; empty for a GPU without NVLink peers.
	NVLinkDomain string
	// CliqueID is the multi-node NVLink clique (GB200 NVL72 and the
	// like) as "<fabric cluster UUID>.<clique id>", empty without one.
	CliqueID string
	// CliquePending: the GPU's NVLink fabric was still being set up when
	// it was read (the fabric manager starts with the node), so its
	// clique is not known yet; ReadClique reads it again.
	CliquePending bool
	// remotes are the PCI bus IDs at the far end of each link.
	remotes []string
	// MIGEnabled tells whether MIG mode is on; MIGProfiles lists the
	// GPU instance profiles and their placements when it is.
	MIGEnabled  bool
	MIGProfiles []MIGProfile
	// MIGPending: MIG mode was changed and takes effect at the GPU's next
	// reset (or the node's reboot).
	MIGPending bool
}

// Options adjust discovery to the host.
type Options struct {
	// PCIeRoot maps a PCI bus ID to its PCIe root complex; nil leaves
	// PCIeRoot empty. On a real node this reads sysfs.
	PCIeRoot func(busID string) (string, error)
	// NUMANode maps a PCI bus ID to the NUMA node of its CPUs (-1: none);
	// on a real node this reads sysfs, as the standard attribute means
	// it. Nil asks NVML, as mock NVML answers: real NVML knows only the
	// node of a GPU that is itself a NUMA node (its own memory, on
	// Grace), answers NOT_SUPPORTED on x86, and before R550 lacks the
	// call.
	NUMANode func(busID string) (int, error)
	// Problem hears of each GPU left out (NVML cannot describe it: it
	// fell off the bus, say) and each optional fact not read; nil
	// ignores them. One bad GPU does not hide the node's others.
	Problem func(index int, err error)
}

func (o Options) problem(index int, err error) {
	if o.Problem != nil {
		o.Problem(index, err)
	}
}

// ErrNoNVML is returned when the NVML library cannot be initialized (no
// driver on this node, or the library is missing).
var ErrNoNVML = errors.New("NVML not available")

// Discover lists the node's GPUs.
func Discover(lib nvml.Interface, opts Options) ([]GPU, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: init: %s", ErrNoNVML, nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count devices: %s", nvml.ErrorString(ret))
	}
	driverVersion, _ := lib.SystemGetDriverVersion()
	devices := make([]nvml.Device, 0, count)
	gpus := make([]GPU, 0, count)
	var errs []error
	for i := range count {
		d, g, err := readGPU(lib, i, opts)
		if err != nil {
			errs = append(errs, err)
			opts.problem(i, err)
			continue
		}
		g.DriverVersion = driverVersion
		devices = append(devices, d)
		gpus = append(gpus, g)
	}
	if count == 0 {
		return nil, errors.New("NVML lists no GPU on this node")
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("no GPU of %d could be read: %w", count, errors.Join(errs...))
	}
	linkPeers(devices, gpus)
	switches(gpus)
	return gpus, nil
}

// readGPU gets GPU i's handle and describes it.
func readGPU(lib nvml.Interface, i int, opts Options) (nvml.Device, GPU, error) {
	d, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, GPU{}, fmt.Errorf("device %d: handle: %s", i, nvml.ErrorString(ret))
	}
	g, err := describe(i, d, opts)
	return d, g, err
}

func describe(i int, d nvml.Device, opts Options) (GPU, error) {
	g := GPU{Index: i, NUMANode: -1}
	fail := func(what string, ret nvml.Return) (GPU, error) {
		return GPU{}, fmt.Errorf("device %d: %s: %s", i, what, nvml.ErrorString(ret))
	}
	var ret nvml.Return
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return fail("uuid", ret)
	}
	if g.Minor, ret = d.GetMinorNumber(); ret != nvml.SUCCESS {
		return fail("minor number", ret)
	}
	if g.Product, ret = d.GetName(); ret != nvml.SUCCESS {
		return fail("name", ret)
	}
	if arch, ret := d.GetArchitecture(); ret == nvml.SUCCESS {
		g.Architecture = architectureName(arch)
	}
	if major, minor, ret := d.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.CUDAComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	mem, memRet := d.GetMemoryInfo()
	g.MemoryMiB = int64(mem.Total / (1024 * 1024))
	pci, ret := d.GetPciInfo()
	if ret != nvml.SUCCESS {
		return fail("pci info", ret)
	}
	g.PCIBusID = busID(pci)
	if opts.PCIeRoot != nil {
		root, err := opts.PCIeRoot(g.PCIBusID)
		if err != nil {
			opts.problem(i, fmt.Errorf("device %d: pcie root of %s (not published): %w", i, g.PCIBusID, err))
		}
		g.PCIeRoot = root
	}
	g.NUMANode = numaNode(i, d, g.PCIBusID, opts)
	nvlinks(d, &g)
	g.CliqueID, g.CliquePending, _ = ReadClique(d)
	if err := migProfiles(d, &g); err != nil {
		// A GPU in MIG mode is still described, without its profiles,
		// so that the agent can say what its configuration needs.
		if !g.MIGEnabled || !errors.Is(err, ErrMIGRefused) {
			return GPU{}, fmt.Errorf("device %d: %w", i, err)
		}
		g.MIGProfiles = nil
		opts.problem(i, fmt.Errorf("device %d: %w", i, err))
	}
	switch {
	case memRet == nvml.SUCCESS:
	case memRet == nvml.ERROR_NOT_SUPPORTED && !g.MIGEnabled:
		// Unified memory (GB10): the GPU has none of its own to report.
		opts.problem(i, fmt.Errorf("device %d: memory: %s (unified memory; published as 0)", i, nvml.ErrorString(memRet)))
	default:
		if err := memoryOfMIG(&g, memRet, opts); err != nil {
			return GPU{}, fmt.Errorf("device %d: %w", i, err)
		}
	}
	return g, nil
}

// numaNode is the GPU's NUMA node as opts.NUMANode reads it, else as
// NVML (a mock) gives it; -1 when unknown.
func numaNode(i int, d nvml.Device, busID string, opts Options) int {
	if opts.NUMANode == nil {
		if n, ret := d.GetNumaNodeId(); ret == nvml.SUCCESS {
			return n
		}
		return -1
	}
	n, err := opts.NUMANode(busID)
	if err != nil {
		opts.problem(i, fmt.Errorf("device %d: NUMA node of %s (not published): %w", i, busID, err))
		return -1
	}
	return n
}

// memoryOfMIG stands in for the GPU's memory when NVML refused it
// (ret). NVML gives a MIG-enabled GPU's memory only to a caller with
// SYS_ADMIN or the MIG monitor capability, which an agent configured for
// whole GPUs lacks; such a GPU is still described, with its whole-GPU
// instance's memory (unknown, 0, where the placements were refused too),
// so that the agent can say that its mode or privilege is wrong rather
// than leave the GPU out.
func memoryOfMIG(g *GPU, ret nvml.Return, opts Options) error {
	if !g.MIGEnabled {
		return fmt.Errorf("memory: %s", nvml.ErrorString(ret))
	}
	full, _, ok := g.FullInstance()
	if !ok {
		opts.problem(g.Index, fmt.Errorf("device %d: memory: %s (MIG mode on; unknown)", g.Index, nvml.ErrorString(ret)))
		return nil
	}
	g.MemoryMiB = full.MemoryMiB
	for i := range g.MIGProfiles { // their names derive from the GPU's memory
		p := &g.MIGProfiles[i]
		p.Name = profileName(p.ComputeSlices, p.MemoryMiB, g.MemoryMiB)
	}
	opts.problem(g.Index, fmt.Errorf("device %d: memory: %s (MIG mode on; taken from the %s instance)", g.Index, nvml.ErrorString(ret), full.Name))
	return nil
}

// nvlinks counts the active links and their bandwidth, and notes where
// each ends: at an NVSwitch when NVML says so, otherwise at the PCI bus
// ID that switches compares with the node's GPUs (for drivers that do not
// report the remote device type).
func nvlinks(d nvml.Device, g *GPU) {
	var perLinkGBps int64
	for l := range nvml.NVLINK_MAX_LINKS {
		state, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			break // no more links on this GPU
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		g.NVLinks++
		if v, ret := d.GetNvLinkVersion(l); ret == nvml.SUCCESS {
			perLinkGBps += linkGBps(nvml.NvlinkVersion(v))
		}
		if t, ret := d.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS && t != nvml.NVLINK_DEVICE_TYPE_UNKNOWN {
			g.NVSwitch = g.NVSwitch || t == nvml.NVLINK_DEVICE_TYPE_SWITCH
			continue
		}
		if remote, ret := d.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
			g.remotes = append(g.remotes, busID(remote))
		}
	}
	g.NVLinkBandwidthGBps = 2 * perLinkGBps
}

// linkGBps is one NVLink link's bandwidth per direction. NVML reports
// the version as nvmlNvlinkVersion_t, a code and not the generation
// (NVLink 4.0 of H100 is 6): A100 12 x 25 x 2 = 600 GB/s, H100 18 x 25 x
// 2 = 900, B200 18 x 50 x 2 = 1800. NVLink 3.1 is GA102's (RTX 3090,
// A6000: 4 links, 112.5 GB/s in all). NVLink 6.0 and any later code get
// NVLink 5's rate, a lower bound.
func linkGBps(version nvml.NvlinkVersion) int64 {
	switch version {
	case nvml.NVLINK_VERSION_INVALID:
		return 0
	case nvml.NVLINK_VERSION_1_0:
		return 20
	case nvml.NVLINK_VERSION_2_0, nvml.NVLINK_VERSION_2_2, nvml.NVLINK_VERSION_3_0, nvml.NVLINK_VERSION_4_0:
		return 25
	case nvml.NVLINK_VERSION_3_1:
		return 14
	}
	return 50
}

// ReadClique reads the GPU's multi-node NVLink fabric clique, and whether
// the fabric is still being set up (not started or in progress), when
// the clique may appear later. A fabric set up with an error, or none,
// has no clique and none pending. ok is false when the read itself
// failed (the GPU lost, or resetting): what was read before still
// stands. The versioned GetGpuFabricInfoV handler calls the C library
// directly, so the v1 call (same cluster UUID and clique ID) is used to
// keep mocks and hardware on one path.
func ReadClique(d nvml.Device) (id string, pending, ok bool) {
	info, ret := d.GetGpuFabricInfo()
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return "", false, true // no multi-node NVLink, or a driver without the call
	default:
		return "", false, false
	}
	switch info.State {
	case nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		return "", true, true
	case nvml.GPU_FABRIC_STATE_COMPLETED:
	default:
		return "", false, true
	}
	var zero [16]uint8
	if nvml.Return(info.Status) != nvml.SUCCESS || info.ClusterUuid == zero {
		return "", false, true
	}
	u := info.ClusterUuid
	return fmt.Sprintf("%x-%x-%x-%x-%x.%d", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16], info.CliqueId), false, true
}

// linkPeers fills NVLinkPeers from NVML's NVLink peer-to-peer status and
// names each connected set of GPUs as one NVLink domain.
func linkPeers(devices []nvml.Device, gpus []GPU) {
	n := len(gpus)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for i := range n {
		if gpus[i].NVLinks == 0 {
			continue
		}
		for j := range n {
			if i == j {
				continue
			}
			status, ret := devices[i].GetP2PStatus(devices[j], nvml.P2P_CAPS_INDEX_NVLINK)
			if ret == nvml.SUCCESS && status == nvml.P2P_STATUS_OK {
				gpus[i].NVLinkPeers = append(gpus[i].NVLinkPeers, gpus[j].UUID)
				parent[find(i)] = find(j)
			}
		}
		slices.Sort(gpus[i].NVLinkPeers)
	}
	members := map[int][]int{}
	for i := range n {
		if len(gpus[i].NVLinkPeers) > 0 {
			members[find(i)] = append(members[find(i)], i)
		}
	}
	for _, m := range members {
		// Named after its lowest GPU index (not its position here, which
		// shifts when a GPU is left out; positions follow indexes):
		// stable across restarts.
		name := fmt.Sprintf("nvlink-%d", gpus[slices.Min(m)].Index)
		for _, i := range m {
			gpus[i].NVLinkDomain = name
		}
	}
}

// switches marks GPUs whose links end at something other than a GPU of
// this node: an NVSwitch.
func switches(gpus []GPU) {
	local := map[string]bool{}
	for _, g := range gpus {
		local[g.PCIBusID] = true
	}
	for i := range gpus {
		for _, r := range gpus[i].remotes {
			gpus[i].NVSwitch = gpus[i].NVSwitch || !local[r]
		}
		gpus[i].remotes = nil
	}
}

// busID formats the PCI bus ID as the kernel and the standard attribute
// do: lower-case domain:bus:device.function.
func busID(pci nvml.PciInfo) string {
	b := make([]byte, 0, len(pci.BusIdLegacy))
	for _, c := range pci.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	id := strings.ToLower(string(b))
	// NVML pads the domain to 8 digits; sysfs uses 4.
	if parts := strings.SplitN(id, ":", 2); len(parts) == 2 && len(parts[0]) == 8 {
		id = parts[0][4:] + ":" + parts[1]
	}
	return id
}

func architectureName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada Lovelace"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	}
	return fmt.Sprintf("arch-%d", a)
}
