package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/replay"
	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/demo/sim"
)

// tableScenario replays the published openb traces with several seeds
// through both profiles, in-process (package sim), and writes the table
// of unallocated GPU at 100% arrived next to the published figures.
func tableScenario(ctx context.Context, f flags) (report.Report, error) {
	say := progress(f.quiet)
	cfg, chosen, err := inProcessProfiles(ctx, f)
	if err != nil {
		return report.Report{}, err
	}
	spec := sim.TableSpec{
		Trace: openbTrace(f.openbDir), Traces: f.traces, Nodes: f.nodes,
		Targets: chosen, Parallel: f.parallel,
	}
	spec.Seeds = seedList(f.seed, f.seeds)
	done, total := 0, len(spec.Traces)*len(spec.Seeds)*len(spec.Targets)
	if f.nodes == 0 && !f.quiet {
		// Measured on 2 cores (BENCHMARKS.md): a user asking for the
		// defaults should know before the first hour has gone.
		fmt.Fprintf(os.Stderr, "openb-table: %d replays of all 1,213 nodes; on 2 cores about a minute per gputopo replay and 7 to 16 per in-tree one (hours in all); --nodes=300 --seeds=5 gives a look in minutes\n", total)
	}
	spec.Progress = func(r sim.Run) {
		done++
		say(fmt.Sprintf("%d/%d replays: %s seed %d %s: %.2f%% unallocated (%d/%d pods placed, %.0f pods/s)",
			done, total, r.Trace, r.Seed, r.Target, r.Unallocated, r.Placed, r.Pods, r.PodsPerSecond))
	}
	runs, err := sim.RunTable(ctx, cfg, spec)
	if err != nil {
		return report.Report{}, keepFinished(filepath.Join(f.out, "runs.csv"), runs, err)
	}
	if err := writeRuns(filepath.Join(f.out, "runs.csv"), runs); err != nil {
		return report.Report{}, err
	}
	var names []string
	for _, t := range chosen {
		names = append(names, t.Name)
	}
	sums := sim.Summarize(runs)
	var md strings.Builder
	if err := sim.WriteMarkdown(&md, sums, names); err != nil {
		return report.Report{}, err
	}
	if err := os.WriteFile(filepath.Join(f.out, "table.md"), []byte(md.String()), 0o640); err != nil {
		return report.Report{}, err
	}
	head, rows := sim.Rows(sums, names)
	nodes, err := nodeCount(spec.Trace, f.nodes)
	if err != nil {
		return report.Report{}, err
	}
	return report.Report{
		Title: "gputopo and the in-tree plugins on the openb traces",
		Tables: []report.Table{{
			Caption: "Unallocated GPU % at 100% arrived, mean ± standard deviation over the seeds, next to the published figures (lower is better)",
			Head:    head, Rows: rows,
		}},
		Scenario: fmt.Sprintf("%d traces x %d seeds, %s GPU nodes; unallocated GPU %% at 100%% arrived, mean ± standard deviation over the seeds (lower is better)", len(spec.Traces), len(spec.Seeds), nodes),
		Notes:    []string{"Replayed in-process on kube-scheduler's own framework (package sim), each pod tried once, as the paper's simulator does. Published figures: the artifact's means over 10 seeds."},
	}, nil
}

// keepFinished writes the replays that finished before err (an
// interrupt, a failed replay) to path, so that hours of a table are not
// lost; err says where they are.
func keepFinished(path string, runs []sim.Run, err error) error {
	finished := slices.DeleteFunc(runs, func(r sim.Run) bool { return r.Target == "" })
	if len(finished) == 0 {
		return err
	}
	if werr := writeRuns(path, finished); werr != nil {
		return errors.Join(err, werr)
	}
	return fmt.Errorf("%w (the %d replays that finished are in %s)", err, len(finished), path)
}

// inProcessProfiles is the configuration (--scheduler-config or the
// shipped one) and the profiles (--schedulers) the in-process scenarios
// replay.
func inProcessProfiles(ctx context.Context, f flags) (*schedconfig.KubeSchedulerConfiguration, []replay.Target, error) {
	cfg, err := tableConfig(ctx, f.schedulerConfig)
	if err != nil {
		return nil, nil, err
	}
	chosen, err := tableTargets(f.schedulers)
	if err != nil {
		return nil, nil, err
	}
	return cfg, chosen, profilesPresent(cfg, chosen, f.schedulerConfig)
}

// profilesPresent checks that cfg has a profile for every chosen target:
// a pod for a missing one would wait for a decision that never comes.
func profilesPresent(cfg *schedconfig.KubeSchedulerConfiguration, chosen []replay.Target, path string) error {
	for _, t := range chosen {
		if !slices.ContainsFunc(cfg.Profiles, func(p schedconfig.KubeSchedulerProfile) bool { return p.SchedulerName == t.SchedulerName }) {
			return fmt.Errorf("--scheduler-config=%s: no profile with schedulerName %s, which --schedulers asks to replay (%s)", path, t.SchedulerName, t.Name)
		}
	}
	return nil
}

// seedList is the n seeds from first on: a long table can be split
// over runs (--seed=4 --seeds=7 is seeds 4..10) and its runs.csv joined.
func seedList(first uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

// tableWords names the replay targets on the command line.
var tableWords = map[string]string{"gputopo": "gputopo", "in-tree": "intree"}

// tableTargets maps --schedulers' words to the replay targets, each once.
func tableTargets(words []string) ([]replay.Target, error) {
	var out []replay.Target
	seen := map[string]bool{}
	for _, w := range words {
		i := slices.IndexFunc(targets, func(t replay.Target) bool { return t.Copy == tableWords[w] })
		switch {
		case i < 0:
			return nil, fmt.Errorf("--schedulers: %q is not a profile the table replays (want gputopo or in-tree)", w)
		case seen[w]:
			return nil, fmt.Errorf("--schedulers: %q named twice", w)
		}
		seen[w] = true
		out = append(out, targets[i])
	}
	return out, nil
}

// nodeCount says how many of the trace's GPU nodes the table replays.
func nodeCount(trace fs.FS, n int) (string, error) {
	all, err := openb.LoadNodes(trace)
	if err != nil {
		return "", err
	}
	// n past the fleet would replay the whole fleet (SampleNodes); the
	// flags refuse such a --nodes.
	if sampled := len(openb.SampleNodes(all, n)); sampled < len(all) {
		return fmt.Sprintf("%d of the %d", sampled, len(all)), nil
	}
	return fmt.Sprintf("all %d", len(all)), nil
}

func writeRuns(path string, runs []sim.Run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"trace", "seed", "scheduler", "unallocated_percent", "pods", "placed", "seconds"})
	for _, r := range runs {
		_ = w.Write([]string{r.Trace, strconv.FormatUint(r.Seed, 10), r.Target, strconv.FormatFloat(r.Unallocated, 'f', 3, 64),
			strconv.Itoa(r.Pods), strconv.Itoa(r.Placed), strconv.FormatFloat(r.Duration.Seconds(), 'f', 1, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tableConfig is the shipped scheduler configuration, or the file's,
// whose profiles are built once here so that an unknown plugin or args
// a plugin refuses fail now, naming the file, not at the first replay.
func tableConfig(ctx context.Context, path string) (*schedconfig.KubeSchedulerConfiguration, error) {
	if path == "" {
		return sim.ShippedConfig()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config: %w", err)
	}
	cfg, err := sim.DecodeConfig(data)
	if err == nil {
		err = sim.CheckProfiles(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config=%s: %w", path, err)
	}
	return cfg, nil
}
