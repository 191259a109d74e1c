// Command perfreport reads what `make bench-perf` leaves in a directory
// (upstream scheduler_perf's JSON data items, one file per suite and
// scheduler, and the quality_*.json files of test/perf) and prints, per
// workload:
//
//	BENCH <workload> intree=<pods/s> gputopo=<pods/s> ratio=<gputopo/intree>
//	LATENCY <workload> p50|p99 intree=<ms> gputopo=<ms>
//	E2E <workload> p50|p99 intree=<ms> gputopo=<ms>
//	QUALITY <workload> <metric> intree=<x> gputopo=<y>
//
// and, where the harness left CPU profiles (-perf-cpuprofile),
//
//	CPU <workload> ms-per-pod intree=<ms> gputopo=<ms> ratio=<gputopo/intree>
//
// With several runs of the same workloads in dir (make bench-perf
// PERF_COUNT=N), each figure is the median over the runs, the ratio the
// median of the runs' own ratios (the i-th run of each scheduler paired),
// and the BENCH line adds runs=N and the ratios' range (CPU: the ratio of
// the medians).
//
// Throughput is the harness's SchedulingThroughput average; LATENCY its
// scheduler_scheduling_attempt_duration_seconds of scheduled attempts
// (from leaving the queue until bound); E2E the pods' end-to-end
// scheduler_pod_scheduling_sli_duration_seconds (from entering the queue
// until bound, every attempt included: what a user waits for);
// CPU the profile's samples with a frame of the scheduler's code
// (k8s.io/kubernetes/pkg/scheduler, which calls every plugin) over the
// pods the profiled (measured) phase scheduled: its throughput times its
// duration, from the same run (the harness keeps the last run's profile),
// or -cpu-pods=N.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

type quality struct {
	Workload  string             `json:"workload"`
	Scheduler string             `json:"scheduler"`
	Metrics   map[string]float64 `json:"metrics"`
}

// topic is in the file name: ..._benchmark_<suite>_<scheduler>_<run id>.json
var topic = regexp.MustCompile(`_benchmark_([a-z-]+)_(intree|gputopo)`)

// name is BenchmarkPerfScheduling/<suite>_<scheduler>/<test case>/<workload>[/<namespace>]
var name = regexp.MustCompile(`^BenchmarkPerfScheduling/[^/]+/([^/]+/[^/]+)`)

func main() {
	cpuPods := flag.Int("cpu-pods", 0, "pods the profiled phase of each workload schedules; 0: its throughput times its duration")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: perfreport [-cpu-pods=N] <directory>")
		os.Exit(2)
	}
	report, scheduled, err := run(flag.Arg(0))
	fmt.Print(report)
	if err == nil {
		err = cpu(flag.Arg(0), *cpuPods, scheduled)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfreport:", err)
		os.Exit(1)
	}
}

// run returns the BENCH, LATENCY, E2E and QUALITY lines and, per
// workload and scheduler, the pods each run's measured phase scheduled.
func run(dir string) (string, map[string]map[string][]float64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return "", nil, err
	}
	// In file name order, which is each suite's and scheduler's run order.
	throughput := map[string]map[string][]float64{} // workload -> scheduler -> pods/s per run
	latency := map[string]map[string][]float64{}    // workload p50|p99 -> scheduler -> ms per run
	e2e := map[string]map[string][]float64{}        // the same, end to end
	duration := map[string]map[string][]float64{}   // workload -> scheduler -> seconds per run
	qualities := map[string]map[string]map[string]float64{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return "", nil, err
		}
		base := filepath.Base(f)
		if strings.HasPrefix(base, "quality_") {
			var q quality
			if err := json.Unmarshal(raw, &q); err != nil {
				return "", nil, fmt.Errorf("%s: %w", f, err)
			}
			for m, v := range q.Metrics {
				set(qualities, q.Workload+" "+m, q.Scheduler, v)
			}
			continue
		}
		t := topic.FindStringSubmatch(base)
		if t == nil {
			continue
		}
		var items dataItems
		if err := json.Unmarshal(raw, &items); err != nil {
			return "", nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, it := range items.DataItems {
			n := name.FindStringSubmatch(it.Labels["Name"])
			if n == nil {
				continue
			}
			switch it.Labels["Metric"] {
			case "scheduler_scheduling_attempt_duration_seconds":
				if it.Labels["result"] == "scheduled" {
					addPercentiles(latency, n[1], t[2], it.Data)
				}
			case "scheduler_pod_scheduling_sli_duration_seconds":
				addPercentiles(e2e, n[1], t[2], it.Data)
			case "SchedulingThroughput":
				add(throughput, n[1], t[2], it.Data["Average"])
			case "SchedulingDuration":
				add(duration, n[1], t[2], it.Data["Duration"])
			}
		}
	}
	if len(throughput) == 0 && len(qualities) == 0 {
		return "", nil, fmt.Errorf("no data items or quality files in %s", dir)
	}
	var lines []string
	for _, wl := range sortedKeys(throughput) {
		lines = append(lines, benchLine(wl, throughput[wl]["intree"], throughput[wl]["gputopo"]))
	}
	for _, k := range sortedKeys(latency) {
		lines = append(lines, fmt.Sprintf("LATENCY %s intree=%s gputopo=%s", k, medianOf(latency[k]["intree"]), medianOf(latency[k]["gputopo"])))
	}
	for _, k := range sortedKeys(e2e) {
		lines = append(lines, fmt.Sprintf("E2E %s intree=%s gputopo=%s", k, medianOf(e2e[k]["intree"]), medianOf(e2e[k]["gputopo"])))
	}
	for _, k := range sortedKeys(qualities) {
		r := qualities[k]
		lines = append(lines, fmt.Sprintf("QUALITY %s intree=%s gputopo=%s", k, value(r["x"], "intree"), value(r["x"], "gputopo")))
	}
	return strings.Join(lines, "\n") + "\n", scheduledPods(throughput, duration), nil
}

// scheduledPods is each run's throughput (pods/s) times its measured
// phase's duration: the pods that phase scheduled (1,000 measured pods
// come out as 1,040-1,050), also for a steady state of fixed duration.
func scheduledPods(throughput, duration map[string]map[string][]float64) map[string]map[string][]float64 {
	out := map[string]map[string][]float64{}
	for w, bySched := range throughput {
		for sched, rates := range bySched {
			secs := duration[w][sched]
			for i := range min(len(rates), len(secs)) {
				add(out, w, sched, rates[i]*secs[i])
			}
		}
	}
	return out
}

// addPercentiles adds one run's p50 and p99 (ms) of a latency data item
// under "<workload> p50" and "<workload> p99".
func addPercentiles(m map[string]map[string][]float64, workload, scheduler string, data map[string]float64) {
	for _, p := range []string{"p50", "p99"} {
		add(m, workload+" "+p, scheduler, data["Perc"+p[1:]])
	}
}

// add appends one run's figure of a scheduler under key.
func add(m map[string]map[string][]float64, key, scheduler string, v float64) {
	if m[key] == nil {
		m[key] = map[string][]float64{}
	}
	m[key][scheduler] = append(m[key][scheduler], v)
}

// benchLine is the BENCH line of a workload from each scheduler's pods/s
// per run.
func benchLine(workload string, intree, gputopo []float64) string {
	runs := min(len(intree), len(gputopo))
	if runs == 0 || slices.Contains(intree[:runs], 0) {
		return fmt.Sprintf("BENCH %s intree=%s gputopo=%s ratio=n/a", workload, medianOf(intree), medianOf(gputopo))
	}
	ratios := make([]float64, runs)
	for i := range runs {
		ratios[i] = gputopo[i] / intree[i]
	}
	line := fmt.Sprintf("BENCH %s intree=%.1f gputopo=%.1f ratio=%.2f", workload, median(intree), median(gputopo), median(ratios))
	if runs > 1 {
		line += fmt.Sprintf(" runs=%d ratio-range=%.2f-%.2f", runs, slices.Min(ratios), slices.Max(ratios))
	}
	return line
}

// median of a non-empty list (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianOf formats the median, or n/a for no runs.
func medianOf(v []float64) string {
	if len(v) == 0 {
		return "n/a"
	}
	return number(median(v))
}

func set(m map[string]map[string]map[string]float64, key, scheduler string, v float64) {
	if m[key] == nil {
		m[key] = map[string]map[string]float64{"x": {}}
	}
	m[key]["x"][scheduler] = v
}

func value(r map[string]float64, k string) string {
	v, ok := r[k]
	if !ok {
		return "n/a"
	}
	return number(v)
}

// number formats v to one decimal without trailing zeros.
func number(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// profile is the harness's CPU profile name:
// <test case>_<workload>_<suite>_<scheduler>_<run id>-cpu.prof; upstream's
// workload names have underscores (2000pods_200nodes).
var profile = regexp.MustCompile(`^([A-Za-z]+)_([A-Za-z0-9_]+)_[a-z-]+_(intree|gputopo)_.*-cpu\.prof$`)

// schedulerCode is what counts as the scheduler's CPU: any sample with a
// frame of kube-scheduler's packages (the framework calls the plugins).
const schedulerCode = `k8s\.io/kubernetes/pkg/scheduler`

// cpu prints CPU per pod from the CPU profiles in dir.
// The harness overwrites a workload's profile on every run, so it is
// the last run's, divided by the pods of that run; with no profiles in
// dir there are no CPU lines.
func cpu(dir string, fixedPods int, scheduled map[string]map[string][]float64) error {
	files, err := filepath.Glob(filepath.Join(dir, "*-cpu.prof"))
	if err != nil || len(files) == 0 {
		return err
	}
	perPod := map[string]map[string][]float64{} // workload -> scheduler -> ms per run
	for _, f := range files {
		m := profile.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			continue
		}
		w := m[1] + "/" + m[2]
		pods := float64(fixedPods)
		if runs := scheduled[w][m[3]]; pods == 0 && len(runs) > 0 {
			pods = runs[len(runs)-1]
		}
		if pods < 1 {
			// Pod-group workloads report no throughput.
			fmt.Fprintf(os.Stderr, "perfreport: no CPU line for %s %s: no throughput to count its pods by (-cpu-pods gives the count)\n", w, m[3])
			continue
		}
		total, err := focusedCPU(f)
		if err != nil {
			return err
		}
		add(perPod, w, m[3], float64(total.Milliseconds())/pods)
	}
	for _, w := range sortedKeys(perPod) {
		in, ours := perPod[w]["intree"], perPod[w]["gputopo"]
		ratio := "n/a"
		if len(in) > 0 && len(ours) > 0 && median(in) > 0 {
			ratio = fmt.Sprintf("%.2f", median(ours)/median(in))
		}
		fmt.Printf("CPU %s ms-per-pod intree=%s gputopo=%s ratio=%s\n", w, medianOf(in), medianOf(ours), ratio)
	}
	return nil
}

// focusedCPU sums the samples of the profile that have a frame of the
// scheduler's code (go tool pprof -traces -focus).
func focusedCPU(file string) (time.Duration, error) {
	out, err := exec.Command("go", "tool", "pprof", "-traces", "-focus="+schedulerCode, file).Output()
	if err != nil {
		return 0, fmt.Errorf("go tool pprof %s: %w", file, err)
	}
	var total time.Duration
	// Each trace starts after a line of dashes with "<value> <function>".
	start := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-----------+") {
			start = true
			continue
		}
		if !start {
			continue
		}
		start = false
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		d, err := time.ParseDuration(fields[0])
		if err != nil {
			return 0, fmt.Errorf("%s: trace value %q: %w", file, fields[0], err)
		}
		total += d
	}
	return total, nil
}
