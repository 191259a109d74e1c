package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/replay"
	"github.com/gputopo/gputopo/pkg/demo/report"
)

// openbScenario replays the openb trace with the published methodology
// (docs/demo.md): the trace's 1,213 GPU nodes per scheduler, pods sampled
// up to 1.3x the GPU capacity and shuffled with the seed, none deleted;
// unallocated GPU % is read at arrived = 100%.
func openbScenario(ctx context.Context, f flags) (report.Report, error) {
	say := progress(f.quiet)
	dir, err := openbDir(f.openbDir)
	if err != nil {
		return report.Report{}, err
	}
	nodes, err := openb.LoadNodes(dir)
	if err != nil {
		return report.Report{}, err
	}
	pods, err := openb.LoadPods(dir, f.trace)
	if err != nil {
		return report.Report{}, err
	}
	arrivals := openb.Inflate(pods, nodes, openb.DefaultInflation, f.seed)
	capacity := openb.CapacityMilli(nodes)
	cp, tmp, err := startControlPlane(ctx, say)
	if err != nil {
		return report.Report{}, err
	}
	defer os.RemoveAll(tmp)
	defer cp.Stop()
	say(fmt.Sprintf("creating %d openb nodes per scheduler with their slices...", len(nodes)))
	fl, err := fleet.StartOpenB(ctx, cp.Client, nodes, []string{"gputopo", "intree"})
	if err != nil {
		return report.Report{}, err
	}
	outs, err := replay.RunOpenB(ctx, cp.Client, arrivals, capacity, targets, fleet.CopyLabel, fleet.ModelLabel, 200, say)
	if err != nil {
		return report.Report{}, err
	}
	rep := report.Report{
		Title:    fmt.Sprintf("gputopo vs first-fit on the openb trace (%s, seed %d)", f.trace, f.seed),
		Scenario: fmt.Sprintf("%d GPU nodes, %d GPUs per scheduler; %d pods arriving up to %.1fx the GPU capacity", len(nodes), capacity/1000, len(arrivals), openb.DefaultInflation),
		Notes: []string{
			"Trace: Weng et al., \"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent\", USENIX ATC 2023; Alibaba clusterdata (openb).",
			"Published figures are the artifact's means over 10 seeds with its own simulator; ours are one seed through the real kube-scheduler with DRA (GPUs as shared devices, compute in percent).",
		},
	}
	for _, p := range openb.PublishedPolicies {
		if v, ok := openb.Published[f.trace][p]; ok {
			rep.Published = append(rep.Published, report.Figure{Label: "openb " + p + " (published)", Value: v, Unit: "%"})
		}
	}
	copyNodes := map[string]map[string]string{}
	for _, n := range fl {
		if copyNodes[n.Copy] == nil {
			copyNodes[n.Copy] = map[string]string{}
		}
		copyNodes[n.Copy][n.Name] = n.Group
	}
	for _, out := range outs {
		r, err := replay.Result(ctx, cp.Client, replay.Workload{}, &out.Outcome, copyNodes[out.Target.Copy])
		if err != nil {
			return rep, err
		}
		r.Curve = nil
		for _, p := range out.Tracker.Points() {
			r.Curve = append(r.Curve, report.Point{ArrivedPercent: p.ArrivedPercent, UnallocatedPercent: p.UnallocatedPercent})
		}
		at100, ok := out.Tracker.At(100)
		r.UnallocatedGPUPercent = at100
		if !ok {
			rep.Notes = append(rep.Notes, out.Target.Name+": the run did not reach 100% arrived; the last figure is shown.")
		}
		r.Extra = nil
		r.PodsPlaced, r.PodsPending = out.Tracker.PodsPlaced(), out.Tracker.PodsRejected()
		rep.Schedulers = append(rep.Schedulers, r)
	}
	return rep, nil
}

func openbDir(flagDir string) (string, error) {
	if flagDir != "" {
		return flagDir, nil
	}
	for _, d := range []string{"../shared/traces/openb", "shared/traces/openb", "../../shared/traces/openb"} {
		if _, err := os.Stat(filepath.Join(d, openb.NodeFile)); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("openb trace not found; pass --openb-dir (the folder with %s)", openb.NodeFile)
}
