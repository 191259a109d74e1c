package openb

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestInflate(t *testing.T) {
	nodes := []Node{{Name: "a", GPUs: 8}, {Name: "b", GPUs: 2}} // 10,000 milli
	pods := []Pod{
		{Name: "cpu"},
		{Name: "share", NumGPU: 1, GPUMilli: 300},
		{Name: "spec", NumGPU: 2, GPUMilli: 1000, GPUSpec: []string{"T4"}},
	}
	tests := []struct {
		name   string
		factor float64
		pods   []Pod
		target int64 // 0: Inflate returns nil
	}{
		{"artifact factor", DefaultInflation, pods, 13_000},
		{"factor one", 1, pods, 10_000},
		{"zero factor", 0, pods, 0},
		{"no GPU pods can never reach the target", DefaultInflation, pods[:1], 0},
		{"no pods", DefaultInflation, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Inflate(tc.pods, nodes, tc.factor, 1)
			if tc.target == 0 {
				if got != nil {
					t.Fatalf("Inflate = %d pods, want nil", len(got))
				}
				return
			}
			req := RequestedMilli(got)
			// Sampling stops at the first pod that reaches the target, so the
			// total overshoots by less than the largest request (2,000).
			if req < tc.target || req >= tc.target+2000 {
				t.Errorf("requested %d milli, want [%d, %d)", req, tc.target, tc.target+2000)
			}
			names := map[string]bool{}
			for _, p := range got {
				if names[p.Name] {
					t.Errorf("duplicate name %q", p.Name)
				}
				names[p.Name] = true
			}
		})
	}
}

func TestInflateCopiesSpec(t *testing.T) {
	pods := []Pod{{Name: "p", NumGPU: 1, GPUMilli: 1000, GPUSpec: []string{"T4"}}}
	got := Inflate(pods, []Node{{GPUs: 4}}, 1, 7)
	if len(got) != 4 {
		t.Fatalf("got %d pods, want 4", len(got))
	}
	got[0].GPUSpec[0] = "edited"
	if pods[0].GPUSpec[0] != "T4" || got[1].GPUSpec[0] != "T4" {
		t.Error("inflated pods share their GPUSpec slice with the original or each other")
	}
}

func TestInflateRealTrace(t *testing.T) {
	dir := traceFS(t)
	nodes, err := LoadNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadPods(dir, "default")
	if err != nil {
		t.Fatal(err)
	}
	capacity := CapacityMilli(nodes)
	names := func(ps []Pod) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.Name
		}
		return out
	}
	a, again, b := Inflate(pods, nodes, DefaultInflation, 1), Inflate(pods, nodes, DefaultInflation, 1), Inflate(pods, nodes, DefaultInflation, 2)
	for _, w := range [][]Pod{a, b} {
		if got := float64(RequestedMilli(w)) / float64(capacity); got < DefaultInflation || got > DefaultInflation+0.01 {
			t.Errorf("inflated workload asks %.4fx capacity, want just past %.1fx", got, DefaultInflation)
		}
	}
	if !slices.Equal(names(a), names(again)) {
		t.Error("same seed gave different workloads")
	}
	if slices.Equal(names(a), names(b)) {
		t.Error("seeds 1 and 2 gave the same workload")
	}
	// Shuffled: the sampling sequence numbers must not come out in order.
	seqs := make([]int, len(a))
	for i, p := range a {
		n, err := strconv.Atoi(p.Name[strings.LastIndexByte(p.Name, '-')+1:])
		if err != nil {
			t.Fatalf("name %q does not end in a sequence number", p.Name)
		}
		seqs[i] = n
	}
	if slices.IsSorted(seqs) {
		t.Error("workload is in sampling order, not shuffled")
	}
	// CPU-only pods are sampled with the rest (the trace has 1,088 of 8,152).
	cpu := 0
	for _, p := range a {
		if p.NumGPU == 0 {
			cpu++
		}
	}
	if frac := float64(cpu) / float64(len(a)); frac < 0.10 || frac > 0.17 {
		t.Errorf("CPU-only pods are %.3f of the workload, want about 0.133 like the trace", frac)
	}
}

func TestArrivalsUntil(t *testing.T) {
	// 10,000 milli-GPU of capacity; requests 0, 300, 2000, 1000, 5000.
	arrivals := []Pod{
		{Name: "cpu"},
		{Name: "share", NumGPU: 1, GPUMilli: 300},
		{Name: "two", NumGPU: 2, GPUMilli: 1000},
		{Name: "one", NumGPU: 1, GPUMilli: 1000},
		{Name: "five", NumGPU: 5, GPUMilli: 1000},
	}
	tests := []struct {
		name    string
		percent float64
		want    int
	}{
		{"exactly reached keeps the pod that reaches it", 33, 4},
		{"crossed keeps the pod that crosses it", 30, 4},
		{"first GPU pod crosses a small mark", 1, 2},
		{"whole request", 83, 5},
		{"never reached returns everything", 100, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ArrivalsUntil(arrivals, 10_000, tc.percent)
			if len(got) != tc.want {
				t.Fatalf("ArrivalsUntil(%g%%) = %d pods, want %d", tc.percent, len(got), tc.want)
			}
		})
	}
}

func TestSampleNodes(t *testing.T) {
	var nodes []Node
	for i := range 10 {
		nodes = append(nodes, Node{Name: strconv.Itoa(i)})
	}
	names := func(ns []Node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.Name)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "0,1,2,3,4,5,6,7,8,9"},
		{10, "0,1,2,3,4,5,6,7,8,9"},
		{20, "0,1,2,3,4,5,6,7,8,9"},
		{5, "0,2,4,6,8"},
		{3, "0,3,6"},
		{1, "0"},
	} {
		if got := names(SampleNodes(nodes, tc.n)); got != tc.want {
			t.Errorf("SampleNodes(10 nodes, %d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}
