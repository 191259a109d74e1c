package main

import (
	"slices"
	"testing"
)

func TestBenchLine(t *testing.T) {
	for _, tc := range []struct {
		name            string
		intree, gputopo []float64
		want            string
	}{
		{"one run", []float64{40}, []float64{50}, "BENCH w intree=40.0 gputopo=50.0 ratio=1.25"},
		{"three runs: medians, the median of the paired ratios and their range",
			[]float64{40, 80, 50}, []float64{60, 60, 50},
			"BENCH w intree=50.0 gputopo=60.0 ratio=1.00 runs=3 ratio-range=0.75-1.50"},
		{"two runs: the middle two averaged", []float64{40, 60}, []float64{40, 90}, "BENCH w intree=50.0 gputopo=65.0 ratio=1.25 runs=2 ratio-range=1.00-1.50"},
		{"a run of one scheduler missing: paired as far as both ran", []float64{40, 50}, []float64{40}, "BENCH w intree=45.0 gputopo=40.0 ratio=1.00"},
		{"no gputopo run", []float64{40}, nil, "BENCH w intree=40 gputopo=n/a ratio=n/a"},
		{"zero throughput", []float64{0}, []float64{10}, "BENCH w intree=0 gputopo=10 ratio=n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := benchLine("w", tc.intree, tc.gputopo); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Profile names give test case, workload and scheduler, with upstream's
// underscores in the workload.
func TestProfileName(t *testing.T) {
	for name, want := range map[string][3]string{
		"GPUFleet_5000nodes_gputopo_gputopo_2026-12-02T10:00:00Z-cpu.prof":                                            {"GPUFleet", "5000nodes", "gputopo"},
		"SchedulingWithResourceClaimTemplate_half_200nodes_dra_intree_2026-12-05T13:12:50Z-cpu.prof":                  {"SchedulingWithResourceClaimTemplate", "half_200nodes", "intree"},
		"SchedulingWithResourceClaimTemplate_2000pods_200nodes_dra_gputopo_2026-12-05T13:12:50Z-cpu.prof":             {"SchedulingWithResourceClaimTemplate", "2000pods_200nodes", "gputopo"},
		"ExtendedResource_Explicit_25classes_2000pods_200nodes_extendedresource_intree_2026-12-05T13:12:50Z-cpu.prof": {"ExtendedResource", "Explicit_25classes_2000pods_200nodes", "intree"},
	} {
		m := profile.FindStringSubmatch(name)
		if m == nil || [3]string{m[1], m[2], m[3]} != want {
			t.Errorf("%s: %v, want %v", name, m, want)
		}
	}
	if profile.MatchString("SchedulingWithResourceClaimTemplate_half_200nodes_dra_intree_x.dat") {
		t.Error("a data file matched")
	}
}

// The pods a run scheduled are its throughput times its duration, run by
// run; a run without its duration counts none.
func TestScheduledPods(t *testing.T) {
	got := scheduledPods(
		map[string]map[string][]float64{"w": {"intree": {10, 20, 30}, "gputopo": {5}}},
		map[string]map[string][]float64{"w": {"intree": {100, 50}}},
	)
	if want := []float64{1000, 1000}; !slices.Equal(got["w"]["intree"], want) {
		t.Errorf("intree: %v, want %v", got["w"]["intree"], want)
	}
	if len(got["w"]["gputopo"]) != 0 {
		t.Errorf("gputopo without a duration: %v, want none", got["w"]["gputopo"])
	}
}
