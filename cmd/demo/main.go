// Command demo shows gputopo next to Kubernetes' own scheduler on a
// simulated GPU fleet, on a laptop, in minutes: it boots etcd,
// kube-apiserver, the resourceclaim controller and the scheduler (both
// profiles) in this process, creates the fleet twice from node agents in
// mock mode, replays a workload through each scheduler on its own copy,
// and writes a terminal summary and an HTML report. See docs/demo.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/sim"
)

func main() {
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return // usage printed, as asked
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type flags struct {
	scenario, cluster, workload, trace, out, kubeconfig, openbDir string
	cpuProfile, schedulerConfig                                   string
	seed                                                          uint64
	until                                                         float64
	nodes, seeds, parallel                                        int
	traces, schedulers, streams                                   []string
	quiet                                                         bool
	// quietLogs: the embedded control plane logs to a file (-v=0).
	quietLogs bool
}

// controlPlaneLog is the file under --out that klog's output (the
// embedded control plane's, client-go's) goes to at -v=0.
const controlPlaneLog = "control-plane.log"

// logToFile sends klog's output to path alone, not to the terminal nor
// to klog's default files in the system's temporary directory, until the
// returned func restores klog's defaults (a later run in the same process
// logs to its own file, or to the terminal).
func logToFile(path string) (restore func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, err
	}
	set := func(values map[string]string) {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		for name, value := range values {
			_ = fs.Set(name, value)
		}
	}
	set(map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"})
	klog.SetOutput(f)
	return func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		set(map[string]string{"logtostderr": "true", "stderrthreshold": "INFO"})
		_ = f.Close()
	}, nil
}

func parse(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.StringVar(&f.scenario, "scenario", "default", `"default" (built-in fleet and workload, or --cluster/--workload files), "nvl72" (two GB200 NVL72 racks and training jobs as pod groups), "openb" (the openb production trace), "openb-table" (every openb trace, several seeds) or "churn" (jobs arriving and leaving, several seeds)`)
	fs.StringVar(&f.cluster, "cluster", "", "fleet file (docs/demo.md); default: the built-in fleet")
	fs.StringVar(&f.workload, "workload", "", "workload file (docs/demo.md); default: the built-in workload")
	fs.StringVar(&f.trace, "trace", "default", "openb pod list: default, gpushare40, multigpu50, ... (openb_pod_list_<trace>.csv)")
	fs.StringVar(&f.openbDir, "openb-dir", "", "openb and openb-table: directory of openb trace files (default: the copy shipped with gputopo)")
	fs.Uint64Var(&f.seed, "seed", 1, "openb: seed of the inflation and order; openb-table and churn: the first of the --seeds seeds")
	fs.Float64Var(&f.until, "until", 100, "openb: stop submitting pods once they ask for this % of the GPU capacity (the headline is read at 100; at most 130, the inflation)")
	fs.IntVar(&f.nodes, "nodes", 0, "openb and openb-table: replay on this many of the trace's GPU nodes, spread over its shapes (a quicker look; 0: all 1,213, as published)")
	traces := fs.String("traces", strings.Join(openb.PublishedTraces, ","), "openb-table: the traces to replay, comma-separated")
	streams := fs.String("streams", strings.Join(sim.ChurnStreamNames(), ","), "churn: the streams to run, comma-separated")
	schedulers := fs.String("schedulers", "gputopo,in-tree", "openb-table and churn: the profiles to replay, comma-separated: gputopo (gputopo-scheduler), in-tree (default-scheduler)")
	fs.IntVar(&f.seeds, "seeds", 10, "openb-table and churn: replay N seeds (from --seed on) of every trace or stream")
	fs.IntVar(&f.parallel, "parallel", min(runtime.NumCPU(), maxParallel), "openb-table and churn: replays at once")
	fs.StringVar(&f.schedulerConfig, "scheduler-config", "", "openb-table and churn: a KubeSchedulerConfiguration file, or a ConfigMap holding one under scheduler-config.yaml as manifests/scheduler ships it, to replay instead of the shipped one (profiles default-scheduler and gputopo-scheduler)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole process (control plane included) to this file")
	fs.StringVar(&f.out, "out", "_output/demo", "directory for report.html and summary.txt")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "replay on a real cluster instead (its nodes, its schedulers: default-scheduler and gputopo-scheduler, one after the other)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	v := fs.Int("v", 0, "log verbosity of the embedded control plane")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	// The flag package stops at the first word that is not a flag: what
	// follows would be dropped without a word.
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q: flags take the form --name=value", fs.Arg(0))
	}
	// The control plane's own logs stay off the terminal unless asked
	// for (run sends them to a file under --out).
	_ = klogFlags.Set("v", fmt.Sprint(*v))
	f.quietLogs = *v == 0
	switch f.scenario {
	case "default", "nvl72", "openb", "openb-table", "churn":
	default:
		return f, fmt.Errorf("--scenario=%q: want default, nvl72, openb, openb-table or churn", f.scenario)
	}
	if err := checkFlagsApply(fs, f.scenario); err != nil {
		return f, err
	}
	f.streams = strings.Split(*streams, ",")
	if _, err := sim.ChurnStreamsNamed(f.streams); err != nil {
		return f, fmt.Errorf("--streams: %w", err)
	}
	f.traces = strings.Split(*traces, ",")
	f.schedulers = strings.Split(*schedulers, ",")
	if _, err := tableTargets(f.schedulers); err != nil {
		return f, err
	}
	if f.seeds < 1 || f.seeds > maxSeeds {
		return f, fmt.Errorf("--seeds=%d: want 1 to %d", f.seeds, maxSeeds)
	}
	if slices.Contains(flagScenarios["seeds"], f.scenario) && f.seed > math.MaxUint64-uint64(f.seeds-1) {
		return f, fmt.Errorf("--seed=%d with --seeds=%d: the last seed would pass %d", f.seed, f.seeds, uint64(math.MaxUint64))
	}
	if f.parallel < 1 || f.parallel > maxParallel {
		return f, fmt.Errorf("--parallel=%d: want 1 to %d (each replay runs a scheduler of its own: more at once than cores only adds memory)", f.parallel, maxParallel)
	}
	if f.nodes < 0 {
		return f, fmt.Errorf("--nodes=%d: want 0 (all) or a positive count", f.nodes)
	}
	// A wrong folder or trace is named here, not once a control plane
	// is up or other traces have run.
	if f.openbDir != "" {
		if _, err := openb.LoadNodes(os.DirFS(f.openbDir)); err != nil {
			return f, fmt.Errorf("--openb-dir=%s: %w", f.openbDir, err)
		}
	}
	switch f.scenario {
	case "openb-table":
		if err := openb.CheckTraces(openbTrace(f.openbDir), f.traces); err != nil {
			return f, fmt.Errorf("--traces: %w", err)
		}
	case "openb":
		if err := openb.CheckTraces(openbTrace(f.openbDir), []string{f.trace}); err != nil {
			return f, fmt.Errorf("--trace: %w", err)
		}
	}
	if err := checkNodeCount(f); err != nil {
		return f, err
	}
	if most := 100 * openb.DefaultInflation; !(f.until > 0 && f.until <= most) { // NaN too
		return f, fmt.Errorf("--until=%g: want a percentage of the GPU capacity in (0, %g]", f.until, most)
	}
	return f, nil
}

// checkNodeCount refuses a --nodes past the trace's fleet, which would
// replay all of it (hours for the table) where a sample was meant.
func checkNodeCount(f flags) error {
	if f.nodes == 0 || (f.scenario != "openb" && f.scenario != "openb-table") {
		return nil
	}
	all, err := openb.LoadNodes(openbTrace(f.openbDir))
	if err != nil {
		return fmt.Errorf("--nodes=%d: %w", f.nodes, err)
	}
	if f.nodes > len(all) {
		return fmt.Errorf("--nodes=%d: the trace has %d GPU nodes (0: all of them)", f.nodes, len(all))
	}
	return nil
}

// flagScenarios lists the scenarios that read each scenario-specific flag;
// the others (--out, --quiet, --cpuprofile, -v) apply to all.
var flagScenarios = map[string][]string{
	"cluster":          {"default", "nvl72"},
	"workload":         {"default", "nvl72"},
	"kubeconfig":       {"default", "nvl72"},
	"trace":            {"openb"},
	"until":            {"openb"},
	"nodes":            {"openb", "openb-table"},
	"openb-dir":        {"openb", "openb-table"},
	"traces":           {"openb-table"},
	"seed":             {"openb", "openb-table", "churn"},
	"seeds":            {"openb-table", "churn"},
	"parallel":         {"openb-table", "churn"},
	"schedulers":       {"openb-table", "churn"},
	"scheduler-config": {"openb-table", "churn"},
	"streams":          {"churn"},
}

// checkFlagsApply refuses a flag set on the command line that the
// scenario does not read: it would be ignored without a word. A cluster
// replay (--kubeconfig) uses the cluster's nodes, not --cluster's.
func checkFlagsApply(fs *flag.FlagSet, scenario string) error {
	var err error
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		set[fl.Name] = true
		if only, ok := flagScenarios[fl.Name]; ok && err == nil && !slices.Contains(only, scenario) {
			err = fmt.Errorf("--%s applies to --scenario=%s, not %s", fl.Name, strings.Join(only, ", "), scenario)
		}
	})
	if err == nil && set["cluster"] && set["kubeconfig"] {
		err = fmt.Errorf("--cluster builds a simulated fleet; --kubeconfig replays on the cluster's own nodes: give one")
	}
	return err
}

// maxSeeds bounds --seeds: every seed is a replay of each trace or stream.
const maxSeeds = 1000

// maxParallel bounds --parallel: every replay at once holds a scheduler
// and its fleet in memory.
const maxParallel = 256
