package discovery_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

func TestDiscoverShapes(t *testing.T) {
	tests := []struct {
		shape       mocknvml.Shape
		product     string
		arch        string
		memMiB      int64
		links       int
		domains     int // distinct NVLink domains
		peersOfGPU0 int
		numaOfGPU5  int
	}{
		{mocknvml.DGXA100, "Mock NVIDIA A100-SXM4-40GB", "Ampere", 40960, 12, 1, 7, 1},
		{mocknvml.DGXH100, "NVIDIA H100 80GB HBM3", "Hopper", 81920, 18, 1, 7, 1},
		{mocknvml.PCIePairs, "NVIDIA H100 NVL", "Hopper", 81920, 12, 4, 1, 0},
	}
	for _, tc := range tests {
		t.Run(string(tc.shape), func(t *testing.T) {
			lib, err := mocknvml.New(tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			gpus, err := discovery.Discover(lib, discovery.Options{PCIeRoot: func(bus string) (string, error) { return "pci" + bus[:7], nil }})
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != 8 {
				t.Fatalf("%d GPUs, want 8", len(gpus))
			}
			domains := map[string]bool{}
			seen := map[string]bool{}
			for _, g := range gpus {
				domains[g.NVLinkDomain] = true
				if seen[g.UUID] || g.UUID == "" {
					t.Errorf("GPU %d: uuid %q empty or repeated", g.Index, g.UUID)
				}
				seen[g.UUID] = true
				if g.PCIBusID == "" || g.PCIeRoot == "" {
					t.Errorf("GPU %d: PCI bus %q, root %q", g.Index, g.PCIBusID, g.PCIeRoot)
				}
			}
			g0 := gpus[0]
			if g0.Product != tc.product || g0.Architecture != tc.arch || g0.MemoryMiB != tc.memMiB || g0.NVLinks != tc.links {
				t.Errorf("GPU 0: %+v, want product %q arch %q memory %d MiB, %d links", g0, tc.product, tc.arch, tc.memMiB, tc.links)
			}
			if len(domains) != tc.domains {
				t.Errorf("%d NVLink domains %v, want %d", len(domains), domains, tc.domains)
			}
			if len(g0.NVLinkPeers) != tc.peersOfGPU0 {
				t.Errorf("GPU 0 has %d NVLink peers, want %d", len(g0.NVLinkPeers), tc.peersOfGPU0)
			}
			if gpus[5].NUMANode != tc.numaOfGPU5 {
				t.Errorf("GPU 5 on NUMA %d, want %d", gpus[5].NUMANode, tc.numaOfGPU5)
			}
		})
	}
	if _, err := mocknvml.New("nope"); err == nil {
		t.Error("unknown shape: want an error")
	}
}

// One GPU fell off the bus and one has no readable PCIe root: the node's
// other GPUs are still discovered (with their NVLink peers), the lost one
// is left out and both problems are reported. With every GPU lost,
// discovery fails.
func TestDiscoverLeavesOutAGPUItCannotRead(t *testing.T) {
	lib, err := mocknvml.New(mocknvml.PCIePairs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noRoot := all[5].PCIBusID
	lost := lib.Devices[3].(*server.Device)
	lost.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	problems := map[int]error{}
	gpus, err := discovery.Discover(lib, discovery.Options{
		PCIeRoot: func(bus string) (string, error) {
			if bus == noRoot {
				return "", errors.New("no such sysfs entry")
			}
			return "pci" + bus[:7], nil
		},
		Problem: func(i int, err error) { problems[i] = err },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 7 {
		t.Fatalf("%d GPUs, want the 7 readable ones", len(gpus))
	}
	for _, g := range gpus {
		if g.Index == 3 {
			t.Error("the lost GPU 3 was published")
		}
		if g.Index == 5 && g.PCIeRoot != "" {
			t.Errorf("GPU 5's PCIe root %q, want none", g.PCIeRoot)
		}
		if g.Index == 7 && (len(g.NVLinkPeers) != 0 || g.NVSwitch) {
			t.Errorf("GPU 7, the lost GPU's NVLink partner: peers %v, NVSwitch %v; want none and false", g.NVLinkPeers, g.NVSwitch)
		}
		if g.Index == 0 && len(g.NVLinkPeers) != 1 {
			t.Errorf("GPU 0 has NVLink peers %v, want its partner", g.NVLinkPeers)
		}
	}
	if len(problems) != 2 || !strings.Contains(fmt.Sprint(problems[3]), "GPU_IS_LOST") || problems[5] == nil {
		t.Errorf("problems %v, want GPU 3 lost and GPU 5's PCIe root", problems)
	}

	for _, d := range lib.Devices {
		d.(*server.Device).GetMemoryInfoFunc = lost.GetMemoryInfoFunc
	}
	if _, err := discovery.Discover(lib, discovery.Options{}); err == nil || !strings.Contains(err.Error(), "no GPU of 8 could be read") {
		t.Errorf("every GPU lost: %v", err)
	}

	// No GPU at all: an error too, rather than an empty pool that would
	// delete the node's slices while the agent looks healthy.
	lib.Devices = nil
	if _, err := discovery.Discover(lib, discovery.Options{}); err == nil || !strings.Contains(err.Error(), "NVML lists no GPU") {
		t.Errorf("no GPU: %v", err)
	}
}

// A domain is named after its lowest GPU index, also when GPU 0 is left
// out (the positions in the list shift, the indexes do not).
func TestDomainNamedByGPUIndex(t *testing.T) {
	lib, err := mocknvml.New(mocknvml.DGXH100)
	if err != nil {
		t.Fatal(err)
	}
	lib.Devices[0].(*server.Device).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	gpus, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if g.NVLinkDomain != "nvlink-1" || !g.NVSwitch {
			t.Errorf("GPU %d: domain %q, NVSwitch %v; want nvlink-1 and true", g.Index, g.NVLinkDomain, g.NVSwitch)
		}
	}
}

// Drivers that do not report what a link ends at: a link to a bus ID of
// no GPU of the node ends at an NVSwitch.
func TestNVSwitchFromBusIDsWithoutRemoteType(t *testing.T) {
	for shape, want := range map[mocknvml.Shape]bool{mocknvml.PCIePairs: false, mocknvml.DGXH100: true} {
		lib, err := mocknvml.New(shape)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range lib.Devices {
			d.(*server.Device).GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_NOT_SUPPORTED
			}
		}
		gpus, err := discovery.Discover(lib, discovery.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gpus {
			if g.NVSwitch != want {
				t.Errorf("%s GPU %d: NVSwitch %v, want %v", shape, g.Index, g.NVSwitch, want)
			}
		}
	}
}

// NVML refuses a MIG-enabled GPU's memory, placements and instances to
// an unprivileged agent (no SYS_ADMIN): every GPU is still described, in
// MIG mode, so that the agent can name what its configuration needs, and
// what was refused is reported.
func TestMIGGPUDescribedWithoutPrivilege(t *testing.T) {
	for _, shape := range []mocknvml.Shape{mocknvml.DGXA100, mocknvml.DGXH100} {
		t.Run(string(shape), func(t *testing.T) {
			lib, err := mocknvml.NewWith(shape, mocknvml.Options{Name: "n", MIG: true, Unprivileged: true})
			if err != nil {
				t.Fatal(err)
			}
			var problems []error
			gpus, err := discovery.Discover(lib, discovery.Options{Problem: func(_ int, err error) { problems = append(problems, err) }})
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != len(lib.Devices) {
				t.Fatalf("%d GPUs described, want %d", len(gpus), len(lib.Devices))
			}
			for i, g := range gpus {
				if !g.MIGEnabled || len(g.MIGProfiles) != 0 {
					t.Errorf("GPU %d: MIG %v with %d profiles, want MIG on and none read", i, g.MIGEnabled, len(g.MIGProfiles))
				}
			}
			if refused := slices.ContainsFunc(problems, func(err error) bool { return errors.Is(err, discovery.ErrMIGRefused) }); !refused {
				t.Errorf("problems %v: none says the MIG placements were refused", problems)
			}
		})
	}
}

// On a real node the NUMA node comes from sysfs (Options.NUMANode), not
// NVML: NVML answers NOT_SUPPORTED on x86 and the GPU's own memory node
// on Grace. A bus without NUMA affinity (-1) or one sysfs cannot answer
// for gets none, the latter reported.
func TestNUMANodeFromTheHost(t *testing.T) {
	lib, err := mocknvml.New(mocknvml.DGXH100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range lib.Devices {
		d.(*server.Device).GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	}
	all, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if all[0].NUMANode != -1 {
		t.Errorf("NVML without the answer: NUMA node %d, want -1", all[0].NUMANode)
	}
	numa := map[string]int{all[0].PCIBusID: 1, all[1].PCIBusID: -1}
	problems := map[int]error{}
	gpus, err := discovery.Discover(lib, discovery.Options{
		NUMANode: func(bus string) (int, error) {
			if n, ok := numa[bus]; ok {
				return n, nil
			}
			return -1, errors.New("no such sysfs entry")
		},
		Problem: func(i int, err error) { problems[i] = err },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, -1, -1} {
		if gpus[i].NUMANode != want {
			t.Errorf("GPU %d: NUMA node %d, want %d", i, gpus[i].NUMANode, want)
		}
	}
	if problems[0] != nil || problems[1] != nil || !strings.Contains(fmt.Sprint(problems[2]), "NUMA node of "+all[2].PCIBusID) {
		t.Errorf("problems %v, want GPU 2's NUMA node only", problems)
	}
}
