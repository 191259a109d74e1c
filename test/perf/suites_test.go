package perf

import (
	"cmp"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/test/integration/framework"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

// suite is one scheduler_perf configuration file and the workloads of it
// that we run.
type suite struct {
	// name is the topic prefix of the data items.
	name string
	// tree is upstream's scheduler_perf directory of the suite: "dra"
	// (the default) or "podgroup".
	tree string
	// upstreamDir is the directory under scheduler_perf/<tree> in the
	// module cache holding the configuration ("." for the tree itself);
	// empty for our own suite in testdata.
	upstreamDir string
	// workloads to run per test case, by scale.
	workloads map[string][]string
	fast      map[string][]string
	// large: the 5,000-node workloads (GPUTOPO_PERF_SCALE=large; make
	// bench-large runs the gputopo suite's).
	large map[string][]string
}

var suites = []suite{
	{
		name: "dra", upstreamDir: ".",
		workloads: map[string][]string{"SchedulingWithResourceClaimTemplate": {"2000pods_200nodes", "half_200nodes"}},
		fast:      map[string][]string{"SchedulingWithResourceClaimTemplate": {"fast"}},
	},
	{
		name: "partitionable", upstreamDir: "partitionabledevices",
		workloads: map[string][]string{"Partitionable": {"half_100nodes"}},
		fast:      map[string][]string{"Partitionable": {"fast"}},
	},
	{
		name: "consumable", upstreamDir: "consumablecapacity",
		workloads: map[string][]string{"ConsumableCapacity": {"half_100nodes"}},
		fast:      map[string][]string{"ConsumableCapacity": {"fast"}},
	},
	{
		name: "extendedresource", upstreamDir: "extendedresource",
		workloads: map[string][]string{"ExtendedResource": {"Explicit_25classes_2000pods_200nodes"}},
		fast:      map[string][]string{"ExtendedResource": {"fast"}},
	},
	{
		name: "podgroup-tas", tree: "podgroup", upstreamDir: "tas",
		workloads: map[string][]string{"TopologyAwareScheduling": {"100Nodes_10Gangs"}},
		fast:      map[string][]string{"TopologyAwareScheduling": {"10Nodes_3Gangs"}},
	},
	{
		name: "podgroup-gang", tree: "podgroup", upstreamDir: "gangscheduling",
		workloads: map[string][]string{"GangScheduling": {"100Nodes_10Gangs"}},
		fast:      map[string][]string{"GangScheduling": {"10Nodes_3Gangs"}},
		// 3,000 pods without claims in gangs of three: what gputopo's
		// measurement of every pod costs where nodes have no devices.
		large: map[string][]string{"GangScheduling": {"5000Nodes_1000Gangs_3000Pods"}},
	},
	{
		name:      "gputopo",
		workloads: map[string][]string{"GPUFleet": {"500nodes"}, "GPUFleetExtended": {"200nodes"}, "MIGStream": {"50nodes"}, "SharedGPUs": {"25nodes"}, "NVL72Groups": {"8racks"}, "MixedFleet": {"1000nodes"}},
		fast:      map[string][]string{"GPUFleet": {"fast"}, "GPUFleetExtended": {"fast"}, "MIGStream": {"fast"}, "SharedGPUs": {"fast"}, "NVL72Groups": {"fast"}, "MixedFleet": {"fast"}},
		large:     map[string][]string{"GPUFleet": {"5000nodes"}},
	},
}

// The two schedulers every workload runs with.
var schedulers = []string{"intree", "gputopo"}

// workdir is a copy of upstream's scheduler_perf/dra tree (configurations
// and templates unchanged; templates are found relative to the
// configuration) plus our testdata and generated fleet.
func workdir(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		tb.Fatalf("locate k8s.io/kubernetes in the module cache: %v", err)
	}
	dir := tb.TempDir()
	for _, tree := range []string{"dra", "podgroup"} {
		upstream := filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf", tree)
		if err := copyTree(upstream, filepath.Join(dir, tree)); err != nil {
			tb.Fatal(err)
		}
	}
	here, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	if err := copyTree(filepath.Join(here, "testdata"), filepath.Join(dir, "gputopo")); err != nil {
		tb.Fatal(err)
	}
	if err := writeFleet(filepath.Join(dir, "gputopo")); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		if !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o640)
	})
}

// configFor writes the suite's configuration for one scheduler: the test
// cases unchanged but for schedulerConfigPath, the metrics collected
// where a case does not choose them (collectedMetrics), and only the
// chosen workloads. It returns the directory to run in and the file name.
func configFor(tb testing.TB, dir string, s suite, scheduler string, chosen map[string][]string) (string, string) {
	tb.Helper()
	src := filepath.Join(dir, "gputopo", "gputopo-config.yaml")
	runDir := filepath.Join(dir, "gputopo")
	if s.upstreamDir != "" {
		runDir = filepath.Join(dir, cmp.Or(s.tree, "dra"), s.upstreamDir)
		src = filepath.Join(runDir, "performance-config.yaml")
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		tb.Fatalf("%s: %v", src, err)
	}
	var kept []map[string]any
	for _, tc := range cases {
		names, ok := chosen[tc["name"].(string)]
		if !ok {
			continue
		}
		var workloads []any
		for _, w := range tc["workloads"].([]any) {
			for _, n := range names {
				if w.(map[string]any)["name"] == n {
					workloads = append(workloads, w)
				}
			}
		}
		if len(workloads) != len(names) {
			tb.Fatalf("%s: test case %s lacks some of the workloads %v", src, tc["name"], names)
		}
		tc["workloads"] = workloads
		tc["schedulerConfigPath"] = filepath.Join(dir, "gputopo", "scheduler-"+scheduler+".yaml")
		if _, ok := tc["metricsCollectorConfig"]; !ok {
			tc["metricsCollectorConfig"] = collectedMetrics()
		}
		kept = append(kept, tc)
	}
	if len(kept) != len(chosen) {
		tb.Fatalf("%s: found %d of the test cases %v", src, len(kept), chosen)
	}
	out, err := yaml.Marshal(kept)
	if err != nil {
		tb.Fatal(err)
	}
	name := fmt.Sprintf("run-%s-%s.yaml", s.name, scheduler)
	if err := os.WriteFile(filepath.Join(runDir, name), out, 0o640); err != nil {
		tb.Fatal(err)
	}
	return runDir, name
}

// inDir runs f in dir: the harness reads templates relative to the
// working directory.
func inDir(tb testing.TB, dir string, f func()) {
	tb.Helper()
	old, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := os.Chdir(old); err != nil {
			tb.Fatal(err)
		}
	}()
	f()
}

// BenchmarkPerfScheduling runs every suite with both schedulers, one
// after the other in the same process. Run it through `make bench`
// (-benchtime=1ns: each workload once).
//
// GPUTOPO_PERF_SUITES, GPUTOPO_PERF_CASES (test case names) and
// GPUTOPO_PERF_SCHEDULERS (comma-separated) narrow the run while
// profiling. GPUTOPO_PERF_SCALE=fast runs each test case's smallest workload instead
// (`make bench-smoke`, in CI): the same code paths in about a minute;
// GPUTOPO_PERF_SCALE=large the 5,000-node fleet (`make bench-large`).
func BenchmarkPerfScheduling(b *testing.B) {
	framework.StartEtcd(klog.Background(), b, false)
	registerPodGroupMetrics(b)
	dir := workdir(b)
	// Workloads are chosen by name above, not by upstream's labels.
	perf.PerfSchedulingLabelFilter = ""
	scale := os.Getenv("GPUTOPO_PERF_SCALE")
	only := os.Getenv("GPUTOPO_PERF_SUITES") // comma-separated suite names
	for _, s := range suites {
		if only != "" && !slices.Contains(strings.Split(only, ","), s.name) {
			continue
		}
		chosen := s.workloads
		switch scale {
		case "fast":
			chosen = s.fast
		case "large":
			chosen = s.large
		}
		if cases := os.Getenv("GPUTOPO_PERF_CASES"); cases != "" {
			chosen = maps.Clone(chosen)
			maps.DeleteFunc(chosen, func(tc string, _ []string) bool { return !slices.Contains(strings.Split(cases, ","), tc) })
		}
		if len(chosen) == 0 {
			continue
		}
		for _, sched := range schedulers {
			if only := os.Getenv("GPUTOPO_PERF_SCHEDULERS"); only != "" && !slices.Contains(strings.Split(only, ","), sched) {
				continue
			}
			b.Run(s.name+"_"+sched, func(b *testing.B) {
				runDir, cfg := configFor(b, dir, s, sched, chosen)
				// The in-tree plugin picks its allocator as in
				// production: the most stable one supporting the
				// enabled features.
				structured.EnableAllocators()
				inDir(b, runDir, func() {
					perf.RunBenchmarkPerfScheduling(b, cfg, s.name+"_"+sched, registry.Registry(),
						perf.WithPrepareFn(qualityHook(sched, s.upstreamDir == "")),
						// A workload that cannot finish fails instead of hanging.
						perf.WithPodsSchedulingTimeout(10*time.Minute))
				})
			})
		}
	}
}

// registerPodGroupMetrics registers kube-scheduler's pod-group metrics
// (scheduler_podgroup_*) for the process: the scheduler registers its
// metrics once, and those only with GenericWorkload on, which the DRA
// suites that run first leave off.
func registerPodGroupMetrics(b *testing.B) {
	b.Helper()
	gate := utilfeature.DefaultMutableFeatureGate
	was := gate.Enabled(features.GenericWorkload)
	if err := gate.SetFromMap(map[string]bool{string(features.GenericWorkload): true}); err != nil {
		b.Fatal(err)
	}
	schedulermetrics.Register()
	if err := gate.SetFromMap(map[string]bool{string(features.GenericWorkload): was}); err != nil {
		b.Fatal(err)
	}
}
