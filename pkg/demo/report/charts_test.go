package report

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestLinePath(t *testing.T) {
	// Data and pixels coincide on [0, 10] so the paths read as the data.
	xs, ys := span{0, 10, 0, 10}, span{0, 10, 0, 10}
	nan := math.NaN()
	tests := []struct {
		name string
		pts  []Point
		want string
	}{
		{"inside", []Point{{1, 1}, {2, 2}, {3, 3}}, "M1 1L2 2L3 3"},
		{"thinned below half a pixel", []Point{{1, 1}, {1.1, 1.1}, {1.2, 1.2}, {3, 3}}, "M1 1L3 3"},
		{"last point kept", []Point{{1, 1}, {1.1, 1.1}}, "M1 1L1.1 1.1"},
		{"enters at the left edge", []Point{{-2, 5}, {2, 5}}, "M0 5L2 5"},
		{"leaves and re-enters", []Point{{5, 5}, {12, 5}, {5, 6}}, "M5 5L10 5M10 5.3L5 6"},
		{"clipped at the top", []Point{{1, 8}, {3, 12}}, "M1 8L2 10"},
		{"NaN breaks the line", []Point{{1, 1}, {nan, 2}, {3, 3}, {4, 4}}, "M3 3L4 4"},
		{"outside", []Point{{20, 20}, {30, 30}}, ""},
		{"one point draws nothing", []Point{{1, 1}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := linePath(tc.pts, xs, ys); got != tc.want {
				t.Errorf("linePath = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestScales(t *testing.T) {
	tests := []struct {
		extent float64
		n      int
		step   float64
	}{
		{100, 5, 20},
		{130, 7, 20},
		{50, 7, 10},
		{23.8, 5, 5},
		{7, 5, 2},
		{0, 5, 1},
	}
	for _, tc := range tests {
		if got := niceStep(tc.extent, tc.n); got != tc.step {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.extent, tc.n, got, tc.step)
		}
	}
	if got, want := ticks(80, 130, 10), []float64{80, 90, 100, 110, 120, 130}; !slices.Equal(got, want) {
		t.Errorf("ticks = %v, want %v", got, want)
	}
	if got, want := ticks(0, 0.3, 0.1), []float64{0, 0.1, 0.2, 0.3}; !slices.Equal(got, want) {
		t.Errorf("ticks with float steps = %v, want %v", got, want)
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		name        string
		want        []float64
		gap, lo, hi float64
		out         []float64
	}{
		{"apart already", []float64{10, 50}, 10, 0, 100, []float64{10, 50}},
		{"pushed apart, input order kept", []float64{50, 45}, 10, 0, 100, []float64{55, 45}},
		{"kept above the bottom", []float64{98, 99, 100}, 10, 0, 100, []float64{80, 90, 100}},
		{"kept below the top", []float64{-5, 0}, 10, 0, 100, []float64{0, 10}},
	}
	for _, tc := range tests {
		if got := spread(tc.want, tc.gap, tc.lo, tc.hi); !slices.Equal(got, tc.out) {
			t.Errorf("%s: spread = %v, want %v", tc.name, got, tc.out)
		}
	}
}

func TestGPUFill(t *testing.T) {
	base := palette[0]
	tests := []struct {
		used float64
		want string
	}{
		{0, freeColor},
		{math.NaN(), freeColor},
		{1, base},
		{1.2, base},
		{0.5, mix(freeColor, base, 0.575)},
	}
	for _, tc := range tests {
		if got := gpuFill(base, tc.used); got != tc.want {
			t.Errorf("gpuFill(%v) = %s, want %s", tc.used, got, tc.want)
		}
	}
	// More use is never lighter: the ramp must read in order.
	lum := func(c string) float64 {
		var v [3]float64
		for i := range 3 {
			var x int
			for _, r := range c[1+2*i : 3+2*i] {
				x = x*16 + strings.IndexRune("0123456789abcdef", r)
			}
			v[i] = float64(x)
		}
		return 0.2126*v[0] + 0.7152*v[1] + 0.0722*v[2]
	}
	prev := math.Inf(1)
	for u := 0.0; u <= 1; u += 0.05 {
		l := lum(gpuFill(base, u))
		if l > prev {
			t.Errorf("fill at %.2f is lighter than at %.2f", u, u-0.05)
		}
		prev = l
	}
	if got := mix("#000000", "#ffffff", 0.5); got != "#808080" {
		t.Errorf("mix = %s, want #808080", got)
	}
}

func TestOccupancyLayout(t *testing.T) {
	tests := []struct {
		name  string
		nodes []NodeUse
		gpus  int
	}{
		{"sample", sampleReport().Schedulers[0].Nodes, 29},
		{"openb scale", openbNodes(3), 6212},
		{"node without GPUs is skipped", []NodeUse{{Name: "cpu"}, {Name: "g", Domains: []DomainUse{{Name: "d", GPUs: []float64{1}}}}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := occupancy([]Result{{Name: "a", Nodes: tc.nodes}}, fullWidth)
			boxes := c.Panels[0].Nodes
			cells := 0
			for i, b := range boxes {
				if b.X < 0 || b.X+b.W > c.Width || b.Y < 0 || b.Y+b.H > c.Height {
					t.Fatalf("node %d at (%v,%v %vx%v) leaves the %vx%v chart", i, b.X, b.Y, b.W, b.H, c.Width, c.Height)
				}
				for _, d := range b.Domains {
					for _, cl := range d.Cells {
						cells++
						if cl.X < d.X || cl.X+cl.S > d.X+d.W || cl.Y < d.Y || cl.Y+cl.S > d.Y+d.H ||
							d.X < b.X || d.X+d.W > b.X+b.W || d.Y < b.Y || d.Y+d.H > b.Y+b.H {
							t.Fatalf("node %d: a GPU square or domain leaves its box", i)
						}
					}
				}
				// Flow layout: only the previous nodes of the same row can
				// touch this one.
				for j := i - 1; j >= 0 && boxes[j].Y == b.Y; j-- {
					if boxes[j].X+boxes[j].W > b.X {
						t.Fatalf("nodes %d and %d overlap", j, i)
					}
				}
				if i > 0 && b.Y != boxes[i-1].Y && b.Y < boxes[i-1].Y+boxes[i-1].H {
					t.Fatalf("node %d starts a row inside the previous one", i)
				}
			}
			if cells != tc.gpus {
				t.Errorf("%d GPU squares, want %d", cells, tc.gpus)
			}
		})
	}
}

func TestLinkClassChart(t *testing.T) {
	empty := linkClassChart([]Result{{Name: "a"}, {Name: "b", LinkClasses: map[string]int{"nvlink": 0}}}, barWidth)
	if !empty.Empty || len(empty.Groups) != 0 || len(empty.Legend) != 2 {
		t.Errorf("no claims: Empty = %v, %d groups, %d legend entries; want true, 0, 2", empty.Empty, len(empty.Groups), len(empty.Legend))
	}
	c := linkClassChart(sampleReport().Schedulers, barWidth)
	var labels []string
	for _, g := range c.Groups {
		labels = append(labels, g.Label)
		for _, b := range g.Bars {
			if b.Y < c.Y0 || b.Y+b.H > c.Y1+1e-9 || b.X < c.X0 || b.X+b.W > c.X1 {
				t.Errorf("bar %q of %s outside the plot", b.Title, g.Label)
			}
		}
	}
	if strings.Join(labels, ",") != "nvlink,numa,system" {
		t.Errorf("groups %v, want the results' order", labels)
	}
	if got := c.Groups[0].Bars[0].Title; got != "gputopo: 310 claims on nvlink (87.08% of its multi-GPU claims)" {
		t.Errorf("bar title %q", got)
	}
}

func TestLead(t *testing.T) {
	r := func(name string, u float64) Result { return Result{Name: name, UnallocatedGPUPercent: u} }
	tests := []struct {
		name string
		rs   []Result
		want string
	}{
		{"better", []Result{r("a", 4), r("b", 6.5)}, "When the arrived pods ask for 100% of the cluster's GPUs, a leaves 4.00% of GPU capacity unallocated: 2.5 points less than b at 6.50%."},
		{"worse", []Result{r("a", 7), r("b", 6)}, "When the arrived pods ask for 100% of the cluster's GPUs, a leaves 7.00% of GPU capacity unallocated: 1 points more than b at 6.00%."},
		{"tie and a run without a value", []Result{r("a", 5), r("b", 5.001), r("c", math.NaN())}, "When the arrived pods ask for 100% of the cluster's GPUs, a leaves 5.00% of GPU capacity unallocated: the same as b."},
		{"read at the end of a workload that asked for more", []Result{{Name: "a", UnallocatedGPUPercent: 2, EndArrivedPercent: 136.25}, {Name: "b", UnallocatedGPUPercent: 3, EndArrivedPercent: 136.25}},
			"When the workload ends (its pods asked for 136.25% of the cluster's GPUs), a leaves 2.00% of GPU capacity unallocated: 1 points less than b at 3.00%."},
		{"alone", []Result{r("a", 5)}, ""},
		{"first without a value", []Result{r("a", math.NaN()), r("b", 5)}, ""},
	}
	for _, tc := range tests {
		if got := lead(tc.rs); got != tc.want {
			t.Errorf("%s: lead = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := unallocatedWhen([]Result{{EndArrivedPercent: 136.25}}); got != "at the end (136.25% arrived)" {
		t.Errorf("unallocatedWhen = %q", got)
	}
}
