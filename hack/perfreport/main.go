// Command perfreport reads what `make bench-perf` leaves in a directory
// (upstream scheduler_perf's JSON data items, one file per suite and
// scheduler, and the quality_*.json files of test/perf) and prints, per
// workload:
//
//	BENCH <workload> intree=<pods/s> gputopo=<pods/s> ratio=<gputopo/intree>
//	LATENCY <workload> p50|p99 intree=<ms> gputopo=<ms>
//	QUALITY <workload> <metric> intree=<x> gputopo=<y>
//
// and, with -cpu-pods=N and the harness's CPU profiles (-perf-cpuprofile),
//
//	CPU <workload> ms-per-pod intree=<ms> gputopo=<ms> ratio=<gputopo/intree>
//
// Throughput is the harness's SchedulingThroughput average; latency its
// scheduler_scheduling_attempt_duration_seconds of scheduled attempts;
// CPU the profile's samples with a frame of the scheduler's code
// (k8s.io/kubernetes/pkg/scheduler, which calls every plugin) over the N
// pods the profiled (measured) phase schedules.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	cpuPods := flag.Int("cpu-pods", 0, "pods the profiled phase of each workload schedules; 0: no CPU lines")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: perfreport [-cpu-pods=N] <directory>")
		os.Exit(2)
	}
	if err := run(flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "perfreport:", err)
		os.Exit(1)
	}
	if *cpuPods > 0 {
		if err := cpu(flag.Arg(0), *cpuPods); err != nil {
			fmt.Fprintln(os.Stderr, "perfreport:", err)
			os.Exit(1)
		}
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	throughput := map[string]map[string]float64{} // workload -> scheduler -> pods/s
	latency := map[string]map[string]float64{}    // workload p50|p99 -> scheduler -> ms
	qualities := map[string]map[string]map[string]float64{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		base := filepath.Base(f)
		if strings.HasPrefix(base, "quality_") {
			var q quality
			if err := json.Unmarshal(raw, &q); err != nil {
				return fmt.Errorf("%s: %w", f, err)
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
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, it := range items.DataItems {
			n := name.FindStringSubmatch(it.Labels["Name"])
			if n == nil {
				continue
			}
			if it.Labels["Metric"] == "scheduler_scheduling_attempt_duration_seconds" && it.Labels["result"] == "scheduled" {
				for _, p := range []string{"p50", "p99"} {
					k := n[1] + " " + p
					if latency[k] == nil {
						latency[k] = map[string]float64{}
					}
					latency[k][t[2]] = it.Data["Perc"+p[1:]]
				}
			}
			if it.Labels["Metric"] != "SchedulingThroughput" {
				continue
			}
			if throughput[n[1]] == nil {
				throughput[n[1]] = map[string]float64{}
			}
			throughput[n[1]][t[2]] = it.Data["Average"]
		}
	}
	if len(throughput) == 0 && len(qualities) == 0 {
		return fmt.Errorf("no data items or quality files in %s", dir)
	}
	for _, w := range sortedKeys(throughput) {
		r := throughput[w]
		in, ok1 := r["intree"]
		ours, ok2 := r["gputopo"]
		if !ok1 || !ok2 || in == 0 {
			fmt.Printf("BENCH %s intree=%s gputopo=%s ratio=n/a\n", w, value(r, "intree"), value(r, "gputopo"))
			continue
		}
		fmt.Printf("BENCH %s intree=%.1f gputopo=%.1f ratio=%.2f\n", w, in, ours, ours/in)
	}
	for _, k := range sortedKeys(latency) {
		fmt.Printf("LATENCY %s intree=%s gputopo=%s\n", k, value(latency[k], "intree"), value(latency[k], "gputopo"))
	}
	for _, k := range sortedKeys(qualities) {
		r := qualities[k]
		fmt.Printf("QUALITY %s intree=%s gputopo=%s\n", k, value(r["x"], "intree"), value(r["x"], "gputopo"))
	}
	return nil
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
// <test case>_<workload>_<suite>_<scheduler>_<run id>-cpu.prof.
var profile = regexp.MustCompile(`^([A-Za-z]+)_([A-Za-z0-9]+)_[a-z]+_(intree|gputopo)_.*-cpu\.prof$`)

// schedulerCode is what counts as the scheduler's CPU: any sample with a
// frame of kube-scheduler's packages (the framework calls the plugins).
const schedulerCode = `k8s\.io/kubernetes/pkg/scheduler`

// cpu prints CPU per pod from the CPU profiles in dir.
func cpu(dir string, pods int) error {
	files, err := filepath.Glob(filepath.Join(dir, "*-cpu.prof"))
	if err != nil {
		return err
	}
	perPod := map[string]map[string]float64{} // workload -> scheduler -> ms
	for _, f := range files {
		m := profile.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			continue
		}
		total, err := focusedCPU(f)
		if err != nil {
			return err
		}
		w := m[1] + "/" + m[2]
		if perPod[w] == nil {
			perPod[w] = map[string]float64{}
		}
		perPod[w][m[3]] = float64(total.Milliseconds()) / float64(pods)
	}
	if len(perPod) == 0 {
		return fmt.Errorf("no CPU profiles (-perf-cpuprofile) in %s", dir)
	}
	for _, w := range sortedKeys(perPod) {
		r := perPod[w]
		ratio := "n/a"
		if r["intree"] > 0 && r["gputopo"] > 0 {
			ratio = fmt.Sprintf("%.2f", r["gputopo"]/r["intree"])
		}
		fmt.Printf("CPU %s ms-per-pod intree=%s gputopo=%s ratio=%s\n", w, value(r, "intree"), value(r, "gputopo"), ratio)
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
