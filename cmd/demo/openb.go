package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/controlplane"
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
	trace := openbTrace(f.openbDir)
	all, err := openb.LoadNodes(trace)
	if err != nil {
		return report.Report{}, err
	}
	nodes := openb.SampleNodes(all, f.nodes)
	pods, err := openb.LoadPods(trace, f.trace)
	if err != nil {
		return report.Report{}, err
	}
	capacity := openb.CapacityMilli(nodes)
	inflated := openb.Inflate(pods, nodes, openb.DefaultInflation, f.seed)
	// The workload is always inflated to 1.3x so a seed names the same
	// order as the artifact's; only the prefix up to --until is submitted.
	arrivals := openb.ArrivalsUntil(inflated, capacity, f.until)
	cp, tmp, err := startControlPlane(ctx, say, controlplane.Options{})
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
	rep := openbReport(f, len(nodes), len(all), capacity, len(arrivals), len(inflated))
	if err := writePlacements(filepath.Join(f.out, "placements.csv"), arrivals, outs); err != nil {
		return rep, err
	}
	return rep, addOpenBResults(ctx, cp.Client, &rep, outs, fl)
}

// openbReport is the report's header: the scenario, the trace's
// citation, and the published figures of the trace.
func openbReport(f flags, nodes, allNodes int, capacityMilli int64, arrivals, inflated int) report.Report {
	rep := report.Report{
		SideBySide: true, // each pod created for both schedulers in turn
		Title:      fmt.Sprintf("gputopo vs first-fit on the openb trace (%s, seed %d)", f.trace, f.seed),
		Scenario:   fmt.Sprintf("%d GPU nodes, %d GPUs per scheduler; the first %d of %d pods sampled up to %.1fx the GPU capacity, submitted until they ask for %g%% of it", nodes, capacityMilli/1000, arrivals, inflated, openb.DefaultInflation, f.until),
		Notes: []string{
			"Trace: Weng et al., \"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent\", USENIX ATC 2023; Alibaba clusterdata (openb).",
			"Published figures are the artifact's means over 10 seeds with its own simulator; ours are one seed through the real kube-scheduler with DRA (GPUs as shared devices, compute in percent).",
		},
	}
	if nodes < allNodes {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Replayed on %d of the trace's %d GPU nodes (--nodes): a quick look; the published figures are for all of them.", nodes, allNodes))
	}
	for _, p := range openb.PublishedPolicies {
		if v, ok := openb.Published[f.trace][p]; ok {
			rep.Published = append(rep.Published, report.Figure{Label: "openb " + p + " (published)", Value: v, Unit: "%"})
		}
	}
	return rep
}

// addOpenBResults adds each scheduler's figures: the unallocated curve
// and its value at 100% arrived from the replay's tracker, occupancy and
// links from the API server.
func addOpenBResults(ctx context.Context, client kubernetes.Interface, rep *report.Report, outs []*replay.OpenBOutcome, fl []fleet.Node) error {
	copyNodes := map[string]map[string]string{}
	for _, n := range fl {
		if copyNodes[n.Copy] == nil {
			copyNodes[n.Copy] = map[string]string{}
		}
		copyNodes[n.Copy][n.Name] = n.Group
	}
	for _, out := range outs {
		r, err := replay.Result(ctx, client, replay.Workload{}, &out.Outcome, copyNodes[out.Target.Copy])
		if err != nil {
			return err
		}
		r.Curve = nil
		for _, p := range out.Tracker.Points() {
			r.Curve = append(r.Curve, report.Point{ArrivedPercent: p.ArrivedPercent, UnallocatedPercent: p.UnallocatedPercent})
		}
		var reached bool
		r.UnallocatedGPUPercent, r.EndArrivedPercent, reached = figureAt100(out.Tracker)
		if !reached {
			rep.Notes = append(rep.Notes, out.Target.Name+": the run did not reach 100% arrived; the last figure is shown.")
		}
		r.Extra = nil
		r.PodsPlaced, r.PodsPending = out.Tracker.PodsPlaced(), out.Tracker.PodsRejected()
		rep.Schedulers = append(rep.Schedulers, r)
	}
	return nil
}

// figureAt100 is the unallocated GPU share at 100% arrived, the paper's
// figure. A run that stopped short of it (--until) gives its last one,
// with the arrived share it was read at (0 when it is the 100% one), so
// that the report never labels a partial figure "@100% arrived".
func figureAt100(t *openb.Tracker) (unallocated, endArrived float64, reached bool) {
	unallocated, reached = t.At(100)
	if pts := t.Points(); !reached && len(pts) > 0 {
		endArrived = pts[len(pts)-1].ArrivedPercent
	}
	return unallocated, endArrived, reached
}

// openbTrace is the trace shipped with gputopo, or a folder of the
// original (or gzip-compressed) files given with --openb-dir.
func openbTrace(flagDir string) fs.FS {
	if flagDir != "" {
		return os.DirFS(flagDir)
	}
	return openb.Embedded()
}

// writePlacements writes every pod's request and outcome per scheduler,
// for analysis beyond the report: scheduler, seq, pod, cpu_milli,
// memory_mib, num_gpu, gpu_milli, gpu_spec, node ("" when pending).
func writePlacements(path string, pods []openb.Pod, outs []*replay.OpenBOutcome) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"scheduler", "seq", "pod", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "node"})
	for _, out := range outs {
		for k, r := range out.Pods {
			p := pods[k]
			_ = w.Write([]string{out.Target.Name, strconv.Itoa(k), p.Name, strconv.FormatInt(p.CPUMilli, 10), strconv.FormatInt(p.MemoryMiB, 10),
				strconv.Itoa(p.NumGPU), strconv.FormatInt(p.GPUMilli, 10), strings.Join(p.GPUSpec, "|"), r.Node})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
