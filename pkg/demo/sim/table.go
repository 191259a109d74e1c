package sim

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strings"
	"time"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/replay"
)

// Run is one replay of the table: a trace, a seed, a target.
type Run struct {
	Trace  string
	Seed   uint64
	Target string
	// Unallocated is the unallocated GPU % at 100% arrived.
	Unallocated   float64
	Placed, Pods  int
	Duration      time.Duration
	PodsPerSecond float64
}

// TableSpec says what to replay.
type TableSpec struct {
	Trace    fs.FS // the openb files (openb.Embedded())
	Traces   []string
	Seeds    []uint64
	Nodes    int // 0: all of the trace's GPU nodes
	Targets  []replay.Target
	Parallel int // replays at once (one scheduler each)
	// Progress, when set, is told about every finished replay, one at a
	// time.
	Progress func(Run)
}

// RunTable replays every trace with every seed through every target,
// the published methodology (Inflate to 1.3x, submit until 100% of the
// GPU capacity is asked for, none deleted), and returns the runs in
// trace, seed, target order. On an error it returns the runs that
// finished, the others zero (no Target).
func RunTable(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, spec TableSpec) ([]Run, error) {
	all, err := openb.LoadNodes(spec.Trace)
	if err != nil {
		return nil, err
	}
	nodes := openb.SampleNodes(all, spec.Nodes)
	capacity := openb.CapacityMilli(nodes)
	type job struct {
		trace  string
		seed   uint64
		target replay.Target
		pods   []openb.Pod
	}
	var jobs []job
	for _, trace := range spec.Traces {
		pods, err := openb.LoadPods(spec.Trace, trace)
		if err != nil {
			return nil, err
		}
		for _, seed := range spec.Seeds {
			arrivals := openb.ArrivalsUntil(openb.Inflate(pods, nodes, openb.DefaultInflation, seed), capacity, 100)
			for _, t := range spec.Targets {
				jobs = append(jobs, job{trace, seed, t, arrivals})
			}
		}
	}
	runs := make([]Run, len(jobs))
	err = inParallel(ctx, spec.Parallel, len(jobs), func(i int) error {
		j := jobs[i]
		out, err := RunOpenB(ctx, cfg, j.target, nodes, j.pods)
		if err != nil {
			return fmt.Errorf("trace %s, seed %d, %s: %w", j.trace, j.seed, j.target.Name, err)
		}
		at, _ := out.Tracker.At(100)
		runs[i] = Run{Trace: j.trace, Seed: j.seed, Target: j.target.Name, Unallocated: at,
			Placed: out.Tracker.PodsPlaced(), Pods: len(j.pods), Duration: out.Duration,
			PodsPerSecond: float64(len(j.pods)) / out.Duration.Seconds()}
		return nil
	}, progress(spec.Progress, runs))
	return runs, err
}

// Summary is a trace's mean and spread over seeds, per target: Std is
// the sample standard deviation.
type Summary struct {
	Trace, Target string
	Mean, Std     float64
	Min, Max      float64
	Seeds         int
	PodsPerSecond float64
}

// Summarize groups runs by trace and target, in first-seen order.
func Summarize(runs []Run) []Summary {
	type key struct{ trace, target string }
	var order []key
	byKey := map[key][]Run{}
	for _, r := range runs {
		k := key{r.Trace, r.Target}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		rs := byKey[k]
		s := Summary{Trace: k.trace, Target: k.target, Seeds: len(rs), Min: math.Inf(1), Max: math.Inf(-1)}
		unallocated := make([]float64, len(rs))
		for i, r := range rs {
			unallocated[i] = r.Unallocated
			s.PodsPerSecond += r.PodsPerSecond / float64(len(rs))
			s.Min, s.Max = math.Min(s.Min, r.Unallocated), math.Max(s.Max, r.Unallocated)
		}
		s.Mean, s.Std = mean(unallocated), sampleStd(unallocated)
		out = append(out, s)
	}
	return out
}

// Rows is the table of the summaries: a head (trace, each target, each
// published policy) and one row per trace, each target's mean ± standard
// deviation over the seeds next to the published figures.
func Rows(sums []Summary, targets []string) (head []string, rows [][]string) {
	var traces []string
	cell := map[[2]string]Summary{}
	for _, s := range sums {
		if _, ok := cell[[2]string{s.Trace, ""}]; !ok {
			traces = append(traces, s.Trace)
			cell[[2]string{s.Trace, ""}] = s
		}
		cell[[2]string{s.Trace, s.Target}] = s
	}
	head = append([]string{"trace"}, targets...)
	for _, p := range openb.PublishedPolicies {
		head = append(head, p+" (published)")
	}
	for _, tr := range traces {
		row := []string{tr}
		for _, t := range targets {
			s, ok := cell[[2]string{tr, t}]
			if !ok {
				row = append(row, "")
				continue
			}
			if s.Seeds < 2 {
				row = append(row, fmt.Sprintf("%.2f (1 seed)", s.Mean))
				continue
			}
			row = append(row, fmt.Sprintf("%.2f ± %.2f", s.Mean, s.Std))
		}
		for _, p := range openb.PublishedPolicies {
			if v, ok := openb.Published[tr][p]; ok {
				row = append(row, fmt.Sprintf("%.2f", v))
			} else {
				row = append(row, "")
			}
		}
		rows = append(rows, row)
	}
	return head, rows
}

// WriteMarkdown writes Rows as a Markdown table.
func WriteMarkdown(w io.Writer, sums []Summary, targets []string) error {
	head, rows := Rows(sums, targets)
	var b strings.Builder
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
