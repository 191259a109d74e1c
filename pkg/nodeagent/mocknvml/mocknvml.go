// Package mocknvml builds go-nvml mock servers for the node shapes gputopo
// simulates, with what the mocks lack filled in: NVLink link state,
// version and remote PCI info, NVLink peer-to-peer status, NUMA nodes,
// bus IDs, the multi-node NVLink fabric (GB200), MIG placements and
// instance IDs as real hardware has them, and what a test can inject:
// NVML events (Xid), lost GPUs, recovery actions and GPU resets.
package mocknvml

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Shape is a node shape the mock can take.
type Shape string

// Shapes of the mocks.
const (
	// DGXA100: 8 A100 SXM4 40GB on NVSwitch (12 NVLink3 links each), 2 NUMA nodes.
	DGXA100 Shape = "dgxa100"
	// DGXH100: 8 H100 SXM5 on NVSwitch (18 NVLink4 links each), 2 NUMA nodes.
	DGXH100 Shape = "dgxh100"
	// DGXH200: 8 H200 SXM5 on NVSwitch (18 NVLink4 links each), 2 NUMA nodes.
	DGXH200 Shape = "dgxh200"
	// DGXB200: 8 B200 on NVSwitch (18 NVLink5 links each), 2 NUMA nodes.
	DGXB200 Shape = "dgxb200"
	// PCIePairs: 8 PCIe H100 NVL in NVLink-bridged pairs (12 NVLink4
	// links over 3 bridges), pairs 0 and 1 on NUMA 0, 2 and 3 on NUMA 1;
	// PCI order interleaves the pairs.
	PCIePairs Shape = "pcie-pairs"
	// GB200Tray: one compute tray of a GB200 NVL72 rack: 4 GB200 GPUs
	// (18 NVLink5 links each, to the rack's NVSwitch trays), two Grace
	// CPUs (NUMA 0 and 1), and the rack's multi-node NVLink clique.
	GB200Tray Shape = "gb200-tray"
)

// Shapes lists every shape.
var Shapes = []Shape{DGXA100, DGXH100, DGXH200, DGXB200, PCIePairs, GB200Tray}

// Options vary a mock beyond its shape.
type Options struct {
	// Name seeds the GPUs' UUIDs so that the same name gives the same
	// UUIDs (a simulated node keeps its identity across agent restarts).
	// Empty gives go-nvml's random UUIDs.
	Name string
	// Rack names the GB200 NVL72 rack (NVLink fabric cluster); trays of
	// one rack share a clique. Ignored by other shapes.
	Rack string
	// MIG turns MIG mode on for every GPU that supports it.
	MIG bool
	// Unprivileged answers as NVML answers a caller without SYS_ADMIN:
	// a MIG-enabled GPU's memory, MIG placements and GPU instances are
	// refused (ERROR_NO_PERMISSION; nvml.h: "Requires privileged user").
	Unprivileged bool
	// FabricPending starts a GB200 tray with its NVLink fabric still
	// being set up (no clique yet), until CompleteFabric.
	FabricPending bool
}

// Server is a go-nvml mock server with events that tests can inject.
type Server struct {
	*server.Server
	events *events
	fabric *fabric // nil: no multi-node NVLink
}

// New returns a mock NVML for the shape.
func New(shape Shape) (*Server, error) { return NewWith(shape, Options{}) }

// NewWith returns a mock NVML for the shape with options.
func NewWith(shape Shape, o Options) (*Server, error) {
	var s *server.Server
	var t topology
	switch shape {
	case DGXA100:
		s, t = dgxa100.New(), nvswitch(12, nvml.NVLINK_VERSION_3_0)
	case DGXH100:
		s, t = dgxh100.New(), nvswitch(18, nvml.NVLINK_VERSION_4_0)
	case DGXH200:
		s, t = dgxh200.New(), nvswitch(18, nvml.NVLINK_VERSION_4_0)
	case DGXB200:
		s, t = dgxb200.New(), nvswitch(18, nvml.NVLINK_VERSION_5_0)
	case PCIePairs:
		s = dgxh100.New()
		pair := func(i int) int { return i % 4 }
		t = topology{links: 12, version: nvml.NVLINK_VERSION_4_0, product: "NVIDIA H100 NVL",
			linked: func(i, j int) bool { return pair(i) == pair(j) },
			numa:   func(i int) int { return pair(i) / 2 }}
	case GB200Tray:
		gb200 := gpus.B200_SXM5_180GB
		gb200.Name = "NVIDIA GB200"
		gb200.MemoryMB = 189471
		s = dgxb200.NewWithGPUs(gpus.Multiple(4, gb200)...)
		t = nvswitch(18, nvml.NVLINK_VERSION_5_0)
		t.numa = func(i int) int { return i / 2 }
		rack := o.Rack
		if rack == "" {
			rack = "rack-0"
		}
		t.fabric = &fabric{cluster: seededUUID("cluster/" + rack), clique: 1}
		t.fabric.pending.Store(o.FabricPending)
	default:
		return nil, fmt.Errorf("unknown mock shape %q (want one of %v)", shape, Shapes)
	}
	m := &Server{Server: s, events: newEvents(s), fabric: t.fabric}
	if o.Name != "" {
		for i, d := range s.Devices {
			d.(*server.Device).UUID = "GPU-" + formatUUID(seededUUID(fmt.Sprintf("%s/%d", o.Name, i)))
		}
	}
	t.wire(s)
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		realMIGPlacements(dev)
		if o.MIG && len(dev.Config.MIGProfiles.GpuInstanceProfiles) > 0 {
			dev.MigMode = nvml.DEVICE_MIG_ENABLE
		}
		if o.Unprivileged {
			unprivileged(dev)
		}
	}
	return m, nil
}

// CompleteFabric finishes setting up the NVLink fabric of a tray started
// with FabricPending: NVML now reports its clique.
func (s *Server) CompleteFabric() {
	if s.fabric != nil {
		s.fabric.pending.Store(false)
	}
}

// MoveToRack moves a GB200 tray to another rack's NVLink fabric (its
// trays recabled, say): NVML now reports that rack's cluster.
func (s *Server) MoveToRack(rack string) {
	if s.fabric != nil {
		s.fabric.mu.Lock()
		s.fabric.cluster, s.fabric.failed = seededUUID("cluster/"+rack), false
		s.fabric.mu.Unlock()
	}
}

// FailFabric makes a GB200 tray's NVLink fabric report that it was set
// up with an error (an NVSwitch tray lost, say): no clique.
func (s *Server) FailFabric() {
	if s.fabric != nil {
		s.fabric.mu.Lock()
		s.fabric.failed = true
		s.fabric.mu.Unlock()
	}
}

// FailFabricReads makes NVML's reads of a GB200 tray's fabric fail
// (ERROR_UNKNOWN), as while a GPU resets, until called with false.
func (s *Server) FailFabricReads(fail bool) {
	if s.fabric != nil {
		s.fabric.unreadable.Store(fail)
	}
}

// ParseShape checks a shape name.
func ParseShape(name string) (Shape, error) {
	if slices.Contains(Shapes, Shape(name)) {
		return Shape(name), nil
	}
	return "", fmt.Errorf("unknown mock shape %q (want one of %v)", name, Shapes)
}

func seededUUID(seed string) [16]byte {
	h := sha256.Sum256([]byte(seed))
	var u [16]byte
	copy(u[:], h[:16])
	u[6] = u[6]&0x0f | 0x40 // version 4 layout
	u[8] = u[8]&0x3f | 0x80
	return u
}

func formatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// unprivileged refuses what NVML refuses a caller without SYS_ADMIN on a
// GPU in MIG mode.
func unprivileged(dev *server.Device) {
	mig := func() bool { return dev.MigMode == nvml.DEVICE_MIG_ENABLE }
	mem, placements, instances := dev.GetMemoryInfoFunc, dev.GetGpuInstancePossiblePlacementsFunc, dev.GetGpuInstancesFunc
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if mig() {
			return nvml.Memory{}, nvml.ERROR_NO_PERMISSION
		}
		return mem()
	}
	dev.GetGpuInstancePossiblePlacementsFunc = func(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
		if mig() {
			return nil, nvml.ERROR_NO_PERMISSION
		}
		return placements(info)
	}
	dev.GetGpuInstancesFunc = func(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
		if mig() {
			return nil, nvml.ERROR_NO_PERMISSION
		}
		return instances(info)
	}
}
