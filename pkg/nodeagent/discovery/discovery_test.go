package discovery_test

import (
	"testing"

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
