package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/demo/sim"
)

// churnScenario runs the churn streams (jobs arriving and leaving on
// NVLink-pair, NVSwitch, GB200, MIG and shared-GPU fleets) with several
// seeds through the profiles, in-process (package sim), and writes their
// tables and make bench's QUALITY lines.
func churnScenario(ctx context.Context, f flags) (report.Report, error) {
	say := progress(f.quiet)
	cfg, chosen, err := inProcessProfiles(ctx, f)
	if err != nil {
		return report.Report{}, err
	}
	streams, err := sim.ChurnStreamsNamed(f.streams)
	if err != nil {
		return report.Report{}, err
	}
	spec := sim.ChurnSpec{Streams: streams, Seeds: seedList(f.seed, f.seeds), Targets: chosen, Parallel: f.parallel}
	done, total := 0, len(spec.Streams)*len(spec.Seeds)*len(spec.Targets)
	spec.Progress = func(r sim.ChurnRun) {
		done++
		say(fmt.Sprintf("%d/%d runs: %s seed %d %s: %d of %d jobs served, %d before the first rejection",
			done, total, r.Stream, r.Seed, r.Target.Name, r.Served, r.Jobs, r.ServedBeforeRejection))
	}
	runs, err := sim.RunChurnTable(ctx, cfg, spec)
	if err != nil {
		return report.Report{}, err
	}
	var quality bytes.Buffer
	if err := sim.WriteChurnQuality(&quality, runs); err != nil {
		return report.Report{}, err
	}
	if err := os.WriteFile(filepath.Join(f.out, "quality.txt"), quality.Bytes(), 0o640); err != nil {
		return report.Report{}, err
	}
	var names, copies []string
	for _, t := range chosen {
		names, copies = append(names, t.Name), append(copies, t.Copy)
	}
	tables := sim.ChurnTables(runs, names, copies)
	var md bytes.Buffer
	if err := sim.WriteTablesMarkdown(&md, tables); err != nil {
		return report.Report{}, err
	}
	if err := os.WriteFile(filepath.Join(f.out, "churn.md"), md.Bytes(), 0o640); err != nil {
		return report.Report{}, err
	}
	return report.Report{
		Title:    "gputopo and the in-tree plugins on churning workloads",
		Scenario: fmt.Sprintf("%d streams x %d seeds: jobs arrive at random, hold their devices for a random time and leave; each is tried once", len(streams), len(spec.Seeds)),
		Tables:   tables,
		Notes: []string{
			"Run in-process on kube-scheduler's own framework (package sim); fleets are the node agent's mock layouts.",
			"A multi-GPU claim is judged when, as it arrived, some node had that many free GPUs at the best link class it offers so many.",
			"Unallocated GPU at 100% arrived is not meaningful with departures; GPUs held is the time-averaged share of the fleet in use.",
		},
	}, nil
}
