package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// One suite's data items per scheduler: throughput, the scheduled
// attempts' latency and the end-to-end latency each get their line,
// attempts of other results and other metrics none.
func TestRunLines(t *testing.T) {
	dir := t.TempDir()
	item := func(metric, result string, data string) string {
		return `{"labels":{"Name":"BenchmarkPerfScheduling/extendedresource_S/ExtendedResource/w/namespace-1","Metric":"` + metric +
			`","result":"` + result + `"},"data":` + data + `}`
	}
	for sched, ms := range map[string][2]string{"intree": {"760", "1900"}, "gputopo": {"1650", "1800"}} {
		items := []string{
			item("SchedulingThroughput", "", `{"Average":45}`),
			item("scheduler_scheduling_attempt_duration_seconds", "scheduled", `{"Perc50":`+ms[0]+`,"Perc99":4000}`),
			item("scheduler_scheduling_attempt_duration_seconds", "error", `{"Perc50":1,"Perc99":1}`),
			item("scheduler_pod_scheduling_sli_duration_seconds", "", `{"Perc50":`+ms[1]+`,"Perc99":5000}`),
			item("scheduler_event_handling_duration_seconds", "", `{"Perc50":1,"Perc99":1}`),
		}
		name := "BenchmarkPerfScheduling_extendedresource_" + sched + "_benchmark_extendedresource_" + sched + "_2026-12-05T14:00:00Z.json"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"dataItems":[`+strings.Join(items, ",")+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := run(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := `BENCH ExtendedResource/w intree=45.0 gputopo=45.0 ratio=1.00
LATENCY ExtendedResource/w p50 intree=760 gputopo=1650
LATENCY ExtendedResource/w p99 intree=4000 gputopo=4000
E2E ExtendedResource/w p50 intree=1900 gputopo=1800
E2E ExtendedResource/w p99 intree=5000 gputopo=5000
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
