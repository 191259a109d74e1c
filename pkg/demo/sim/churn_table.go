package sim

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gputopo/gputopo/pkg/demo/replay"
)

// ChurnSpec says which streams to run with which seeds through which
// targets.
type ChurnSpec struct {
	Streams  []Stream
	Seeds    []uint64
	Targets  []replay.Target
	Parallel int
	// Progress, when set, is told about every finished run, one at a time.
	Progress func(ChurnRun)
}

// RunChurnTable runs every stream with every seed through every target
// and returns the runs in stream, seed, target order.
func RunChurnTable(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, spec ChurnSpec) ([]ChurnRun, error) {
	type job struct {
		st     Stream
		seed   uint64
		target replay.Target
	}
	var jobs []job
	for _, st := range spec.Streams {
		for _, seed := range spec.Seeds {
			for _, t := range spec.Targets {
				jobs = append(jobs, job{st, seed, t})
			}
		}
	}
	runs := make([]ChurnRun, len(jobs))
	err := inParallel(ctx, spec.Parallel, len(jobs), func(i int) error {
		j := jobs[i]
		run, err := RunChurn(ctx, cfg, j.st, j.seed, j.target)
		runs[i] = run
		return err
	}, progress(spec.Progress, runs))
	return runs, err
}

// WriteChurnQuality writes a QUALITY line per stream, seed and measure
// with every target's figure, as make bench's other workloads do:
// QUALITY churn/<stream>/seed<k> <measure> <copy>=<value> ...
func WriteChurnQuality(w io.Writer, runs []ChurnRun) error {
	type key struct {
		stream string
		seed   uint64
	}
	var order []key
	byKey := map[key][]ChurnRun{}
	for _, r := range runs {
		k := key{r.Stream, r.Seed}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	measures := []struct {
		name  string
		value func(ChurnRun) string
	}{
		{"served", func(r ChurnRun) string { return fmt.Sprint(r.Served) }},
		{"served-before-first-rejection", func(r ChurnRun) string { return fmt.Sprint(r.ServedBeforeRejection) }},
		{"best-link-class-percent", func(r ChurnRun) string { return fmt.Sprintf("%.1f", r.BestLinkPercent()) }},
		{"rejected-with-room", func(r ChurnRun) string { return fmt.Sprint(r.RejectedWithRoom) }},
		{"gpus-held-percent", func(r ChurnRun) string { return fmt.Sprintf("%.1f", r.AllocatedPercent) }},
	}
	var b strings.Builder
	for _, k := range order {
		for _, m := range measures {
			if m.name == "best-link-class-percent" && !slices.ContainsFunc(byKey[k], func(r ChurnRun) bool { return r.MultiGPU > 0 }) {
				continue // no multi-GPU claims on this fleet
			}
			fmt.Fprintf(&b, "QUALITY churn/%s/seed%d %s", k.stream, k.seed, m.name)
			for _, r := range byKey[k] {
				fmt.Fprintf(&b, " %s=%s", r.Target.Copy, m.value(r))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
