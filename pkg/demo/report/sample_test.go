package report

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// sampleReport is a small comparison shaped like the demo's: NVSwitch,
// NVLink-pair and shared nodes, two schedulers, published references, and
// names that need escaping.
func sampleReport() Report {
	nodes := func(frag float64) []NodeUse {
		return []NodeUse{
			{Name: "dgx-0", Shape: "8x H100 SXM", Domains: []DomainUse{{"nvswitch", []float64{1, 1, 1, 1, 1, 1, 1, 1}}}},
			{Name: "dgx-1", Shape: "8x H100 SXM", Domains: []DomainUse{{"nvswitch", []float64{1, 1, 1, 1, frag, 0, 0, 0}}}},
			{Name: "pcie-0", Shape: "8x L40S in NVLink pairs", Domains: []DomainUse{
				{"pair-0", []float64{1, 1}}, {"pair-1", []float64{1, frag}}, {"pair-2", []float64{0.5, 0}}, {"pair-3", []float64{0, 0}}}},
			{Name: "pcie-1", Shape: "4x A100 PCIe", Domains: []DomainUse{{"pair-0", []float64{0.25, 0.75}}, {"pair-1", []float64{1, 0}}}},
			{Name: "t4-<0>", Shape: "1x T4", Domains: []DomainUse{{"gpu", []float64{frag}}}},
		}
	}
	return Report{
		Title:     "gputopo vs first-fit",
		Scenario:  "openb default, seed 1",
		Generated: time.Date(2026, 7, 1, 12, 30, 0, 0, time.UTC),
		Schedulers: []Result{
			{
				Name: "gputopo", PodsPlaced: 9812, PodsPending: 120, Duration: 12300 * time.Millisecond, PodsPerSecond: 797.7,
				UnallocatedGPUPercent: 5.12, Curve: curve(1, 5.12),
				LinkClasses:    map[string]int{"nvlink": 310, "numa": 40, "system": 6},
				LinkClassOrder: []string{"nvlink", "numa", "system"},
				Nodes:          nodes(0.9),
				Pending:        map[string]int{"insufficient GPU": 100, "gpu_spec <T4>": 20},
				Extra:          []Figure{{Label: "MIG requests served before first rejection", Value: 412}},
			},
			{
				Name: "in-tree (first-fit)", PodsPlaced: 9650, PodsPending: 282, Duration: 14100 * time.Millisecond, PodsPerSecond: 684.4,
				UnallocatedGPUPercent: 8.9, Curve: curve(2, 8.9),
				LinkClasses:    map[string]int{"nvlink": 150, "numa": 120, "system": 86},
				LinkClassOrder: []string{"nvlink", "numa", "system"},
				Nodes:          nodes(0.3),
				Pending:        map[string]int{"insufficient GPU": 250, "gpu_spec <T4>": 32},
				Extra:          []Figure{{Label: "MIG requests served before first rejection", Value: 355}},
			},
		},
		Published: []Figure{{Label: "openb FGD (published)", Value: 4.77, Unit: "%"}, {Label: "openb BestFit (published)", Value: 7.14, Unit: "%"}},
		Notes:     []string{"Trace: Weng et al., ATC 2023 & Alibaba clusterdata <openb>."},
	}
}

// curve synthesizes an artifact-like curve: unallocated falls one for one
// with arrivals until pods start failing to fit, reaches floor% at 100%
// arrived and levels off past it (100 - a + a softplus of the overflow).
func curve(seed uint64, floor float64) []Point {
	rng := rand.New(rand.NewPCG(seed, 0))
	c, s := 100-0.7*floor, 0.84*floor
	var pts []Point
	for a := 0.0; a < 130; a += rng.Float64() * 0.03 {
		u := min(100, 100-a+s*math.Log1p(math.Exp((a-c)/s)))
		pts = append(pts, Point{a, u})
	}
	return pts
}

// openbNodes is an openb-sized cluster (1,213 nodes: 617 with 8 GPUs, 54
// with 4, 518 with 2, 24 with 1) with random occupancy, to check that the
// page stays usable at the trace's scale.
func openbNodes(seed uint64) []NodeUse {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []NodeUse
	for _, shape := range []struct{ nodes, gpus, domains int }{{617, 8, 2}, {54, 4, 2}, {518, 2, 1}, {24, 1, 1}} {
		for range shape.nodes {
			n := NodeUse{Name: "openb-node-" + strconv.Itoa(len(out)), Shape: strconv.Itoa(shape.gpus) + "x G2"}
			for d := range shape.domains {
				dom := DomainUse{Name: "nvl" + strconv.Itoa(d)}
				for range shape.gpus / shape.domains {
					u := 1.0
					switch x := rng.Float64(); {
					case x < 0.08:
						u = 0
					case x < 0.25:
						u = rng.Float64()
					}
					dom.GPUs = append(dom.GPUs, u)
				}
				n.Domains = append(n.Domains, dom)
			}
			out = append(out, n)
		}
	}
	return out
}
