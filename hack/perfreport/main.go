// Command perfreport reads what `make bench-perf` leaves in a directory
// (upstream scheduler_perf's JSON data items, one file per suite and
// scheduler, and the quality_*.json files of test/perf) and prints, per
// workload:
//
//	BENCH <workload> intree=<pods/s> gputopo=<pods/s> ratio=<gputopo/intree>
//	QUALITY <workload> <metric> intree=<x> gputopo=<y>
//
// Throughput is the harness's SchedulingThroughput average.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
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
var topic = regexp.MustCompile(`_benchmark_([a-z]+)_(intree|gputopo)`)

// name is BenchmarkPerfScheduling/<suite>_<scheduler>/<test case>/<workload>[/<namespace>]
var name = regexp.MustCompile(`^BenchmarkPerfScheduling/[^/]+/([^/]+/[^/]+)`)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: perfreport <directory>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "perfreport:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	throughput := map[string]map[string]float64{} // workload -> scheduler -> pods/s
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
			if it.Labels["Metric"] != "SchedulingThroughput" {
				continue
			}
			n := name.FindStringSubmatch(it.Labels["Name"])
			if n == nil {
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
