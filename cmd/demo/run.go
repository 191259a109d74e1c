package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/controlplane"
	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/replay"
	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/demo/scenarios"
)

// The two schedulers, each on its own copy of the fleet.
var targets = replay.Targets

func run(ctx context.Context, args []string) error {
	f, err := parse(args)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := writableDir(f.out); err != nil {
		return fmt.Errorf("--out=%s: %w", f.out, err)
	}
	logPath := ""
	if f.quietLogs {
		logPath = filepath.Join(f.out, controlPlaneLog)
		restore, err := logToFile(logPath)
		if err != nil {
			return fmt.Errorf("--out=%s: %w", f.out, err)
		}
		defer restore()
	}
	if f.cpuProfile != "" {
		prof, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			_ = prof.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := prof.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "--cpuprofile: %v\n", err)
			}
		}()
	}
	var rep report.Report
	switch {
	case f.kubeconfig != "":
		rep, err = onCluster(ctx, f)
	case f.scenario == "openb-table":
		rep, err = tableScenario(ctx, f)
	case f.scenario == "churn":
		rep, err = churnScenario(ctx, f)
	case f.scenario == "openb":
		rep, err = openbScenario(ctx, f)
	default:
		rep, err = defaultScenario(ctx, f)
	}
	if err != nil && logPath != "" && !isEmpty(logPath) {
		return fmt.Errorf("%w (the log: %s)", err, logPath)
	}
	if err != nil {
		return err
	}
	rep.Generated = time.Now()
	var summary bytes.Buffer
	if err := report.WriteSummary(&summary, rep); err != nil {
		return err
	}
	fmt.Print("\n" + summary.String())
	if err := os.WriteFile(filepath.Join(f.out, "summary.txt"), summary.Bytes(), 0o640); err != nil {
		return err
	}
	html, err := os.Create(filepath.Join(f.out, "report.html"))
	if err != nil {
		return err
	}
	if err := report.WriteHTML(html, rep); err != nil {
		html.Close()
		return err
	}
	if err := html.Close(); err != nil {
		return err
	}
	abs, _ := filepath.Abs(filepath.Join(f.out, "report.html"))
	fmt.Printf("\nReport: file://%s  (%s in all)\n", abs, time.Since(started).Round(time.Second))
	return nil
}

// writableDir makes dir and checks that a file can be written in it, so
// that a run of hours does not end unable to write its report.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	probe, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return err
	}
	name := probe.Name()
	return errors.Join(probe.Close(), os.Remove(name))
}

// progress prints a line that overwrites itself on a terminal.
func progress(quiet bool) func(string) {
	if quiet {
		return func(string) {}
	}
	tty := isTerminal(os.Stderr)
	return func(line string) {
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(os.Stderr, line)
		}
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// startControlPlane boots the embedded control plane and the classes.
func startControlPlane(ctx context.Context, say func(string), o controlplane.Options) (*controlplane.ControlPlane, string, error) {
	dir, err := os.MkdirTemp("", "gputopo-demo-")
	if err != nil {
		return nil, "", err
	}
	say("starting etcd, kube-apiserver, resourceclaim controller and scheduler in this process...")
	cp, err := controlplane.StartWith(ctx, dir, o)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	if err := fleet.CreateDeviceClasses(ctx, cp.Client); err != nil {
		cp.Stop()
		os.RemoveAll(dir)
		return nil, "", err
	}
	return cp, dir, nil
}

// workload is --workload's file, or the scenario's built-in workload.
func workload(f flags) (replay.Workload, error) {
	if f.workload != "" {
		w, err := replay.LoadWorkload(f.workload)
		if err != nil {
			return w, fmt.Errorf("--workload: %w", err)
		}
		return w, nil
	}
	if f.scenario == "nvl72" {
		return replay.ParseWorkload(scenarios.NVL72Workload, "built-in NVL72 workload")
	}
	return replay.ParseWorkload(scenarios.DefaultWorkload, "built-in workload")
}

// clusterOf is --cluster's fleet, or the scenario's built-in one.
func clusterOf(f flags) (fleet.Cluster, error) {
	if f.cluster != "" {
		c, err := fleet.LoadCluster(f.cluster)
		if err != nil {
			return c, fmt.Errorf("--cluster: %w", err)
		}
		return c, nil
	}
	return builtinCluster(f)
}

// builtinCluster is the scenario's built-in fleet.
func builtinCluster(f flags) (fleet.Cluster, error) {
	if f.scenario == "nvl72" {
		return fleet.ParseCluster(scenarios.NVL72Cluster, "built-in NVL72 fleet")
	}
	return fleet.ParseCluster(scenarios.DefaultCluster, "built-in fleet")
}

// defaultScenario replays a workload on a fleet (the built-in ones of
// --scenario=default or nvl72, or --cluster/--workload files) through
// both profiles; a workload with pod groups runs with their gates.
func defaultScenario(ctx context.Context, f flags) (report.Report, error) {
	say := progress(f.quiet)
	cluster, err := clusterOf(f)
	if err != nil {
		return report.Report{}, err
	}
	w, err := workload(f)
	if err != nil {
		return report.Report{}, err
	}
	cp, dir, err := startControlPlane(ctx, say, controlplane.Options{PodGroups: w.HasGroups()})
	if err != nil {
		return report.Report{}, err
	}
	defer os.RemoveAll(dir)
	defer cp.Stop()
	say("starting the node agents (mock NVML) of both copies of the fleet...")
	fl, err := fleet.Start(ctx, cp.Client, cluster, []string{"gputopo", "intree"}, filepath.Join(dir, "nodes"))
	if err != nil {
		return report.Report{}, err
	}
	defer fl.Stop()
	if err := waitPublished(ctx, cp.Client, fl); err != nil {
		return report.Report{}, err
	}
	gpus, err := countGPUs(ctx, cp.Client, nodesOf(fl, "gputopo"))
	if err != nil {
		return report.Report{}, err
	}
	outs, err := replay.Run(ctx, cp.Client, w, targets, replay.Options{CapacityGPUs: gpus, Progress: say, NodeLabel: fleet.CopyLabel})
	if err != nil {
		return report.Report{}, err
	}
	rep := report.Report{
		SideBySide: true,
		Title:      "gputopo vs the in-tree DRA scheduler",
		Scenario:   fmt.Sprintf("%d nodes, %.0f GPUs per scheduler; %d pods over %d steps, some of them gone by the end (placed and pending count those left)", len(fl.Nodes)/2, gpus, len(outs[0].Pods), w.Steps),
		Notes: []string{
			"Both schedulers run in one kube-scheduler process (profiles gputopo-scheduler and default-scheduler with the in-tree DynamicResources plugin), each on its own identical copy of the fleet.",
			"Slices come from gputopo's node agent on go-nvml's mock servers: " + fleetSummary(cluster) + ".",
		},
	}
	for _, out := range outs {
		r, err := replay.Result(ctx, cp.Client, w, out, nodesOf(fl, out.Target.Copy))
		if err != nil {
			return rep, err
		}
		rep.Schedulers = append(rep.Schedulers, r)
	}
	if w.HasGroups() {
		tables, racks, figures, err := replay.GroupTables(ctx, cp.Client, w, outs)
		if err != nil {
			return rep, err
		}
		rep.Tables = append(rep.Tables, tables...)
		rep.Racks = append(rep.Racks, racks...)
		for i := range rep.Schedulers {
			rep.Schedulers[i].Extra = append(rep.Schedulers[i].Extra, figures[i]...)
		}
		rep.Notes = append(rep.Notes, "Pod groups (scheduling.k8s.io/v1beta1) with the gates of manifests/pod-groups: gputopo-scheduler places them with GPUCliquePlacement (cliques from the GPUs' cliqueID), default-scheduler with the in-tree TopologyPlacementGenerator (cliques from the node label the agents write).")
	}
	return rep, nil
}

func nodesOf(fl *fleet.Fleet, copyName string) map[string]string {
	out := map[string]string{}
	for _, n := range fl.Nodes {
		if n.Copy == copyName {
			out[n.Name] = n.Group
		}
	}
	return out
}

// waitPublished waits until every node's agent has published its slices.
func waitPublished(ctx context.Context, client kubernetes.Interface, fl *fleet.Fleet) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		published := map[string]bool{}
		for _, s := range list.Items {
			if s.Spec.NodeName != nil {
				published[*s.Spec.NodeName] = true
			}
		}
		for _, n := range fl.Nodes {
			if !published[n.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

// countGPUs counts the whole GPUs published on nodes (every node when
// nil), for the arrival curve's capacity.
func countGPUs(ctx context.Context, client kubernetes.Interface, nodes map[string]string) (float64, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0.0
	for _, s := range list.Items {
		if s.Spec.NodeName == nil {
			continue
		}
		if _, ok := nodes[*s.Spec.NodeName]; nodes != nil && !ok {
			continue
		}
		for _, d := range s.Spec.Devices {
			if t := d.Attributes[contract.AttrType]; t.StringValue != nil && *t.StringValue == contract.TypeGPU {
				n++
			}
		}
	}
	return n, nil
}

// onCluster replays the workload on a real cluster: first through the
// default scheduler, then, after its pods are gone, through gputopo.
func onCluster(ctx context.Context, f flags) (report.Report, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return report.Report{}, fmt.Errorf("--kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return report.Report{}, err
	}
	w, err := workload(f)
	if err != nil {
		return report.Report{}, err
	}
	// Both runs use the whole cluster, one after the other.
	gpus, err := countGPUs(ctx, client, nil)
	if err != nil {
		return report.Report{}, fmt.Errorf("count the cluster's GPUs: %w", err)
	}
	if gpus == 0 {
		return report.Report{}, fmt.Errorf("the cluster publishes no GPU (no ResourceSlice device with %s %q): install the node agent first (docs/install.md)", contract.AttrType, contract.TypeGPU)
	}
	rep := report.Report{Title: "gputopo vs the in-tree DRA scheduler", Scenario: "on cluster " + cfg.Host}
	passes := []replay.Target{targets[1], targets[0]}
	for _, t := range passes {
		// Pods left there would hold GPUs and make the passes unequal.
		if _, err := client.CoreV1().Namespaces().Get(ctx, t.Namespace(), metav1.GetOptions{}); err == nil {
			return rep, fmt.Errorf("namespace %s exists (left by an earlier run?): delete it first (kubectl delete namespace %s)", t.Namespace(), t.Namespace())
		}
	}
	for _, t := range passes {
		r, err := clusterPass(ctx, client, w, t, replay.Options{CapacityGPUs: gpus, Progress: progress(f.quiet)})
		if err != nil {
			return rep, err
		}
		rep.Schedulers = append([]report.Result{r}, rep.Schedulers...)
	}
	return rep, nil
}

// namespaceGone is how long a pass's namespace may take to go: its pods'
// claims are unprepared by the kubelets first.
const namespaceGone = 5 * time.Minute

// clusterPass replays the workload through one scheduler and removes its
// namespace, also when the replay fails or is interrupted, so that no pod
// keeps real GPUs; the next pass starts only once it is gone.
func clusterPass(ctx context.Context, client kubernetes.Interface, w replay.Workload, t replay.Target, o replay.Options) (r report.Result, err error) {
	defer func() {
		if cerr := removeNamespace(context.WithoutCancel(ctx), client, t.Namespace()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	outs, err := replay.Run(ctx, client, w, []replay.Target{t}, o)
	if err != nil {
		return r, err
	}
	return replay.Result(ctx, client, w, outs[0], allNodes(ctx, client))
}

// removeNamespace deletes the namespace and waits until it is gone.
func removeNamespace(ctx context.Context, client kubernetes.Interface, ns string) error {
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, namespaceGone, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s still there after %s (its pods still hold GPUs): %w", ns, namespaceGone, err)
	}
	return nil
}

func allNodes(ctx context.Context, client kubernetes.Interface) map[string]string {
	out := map[string]string{}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return out
	}
	for _, n := range list.Items {
		out[n.Name] = strings.TrimSpace(n.Labels["node.kubernetes.io/instance-type"])
	}
	return out
}

// fleetSummary names the node groups the slices came from, with their
// mock shape and the agent's mode ("4 x dgxh100 (whole)").
func fleetSummary(c fleet.Cluster) string {
	parts := make([]string, 0, len(c.Nodes))
	for _, g := range c.Nodes {
		parts = append(parts, fmt.Sprintf("%d x %s (%s)", g.Count, g.Shape, g.AgentMode()))
	}
	return strings.Join(parts, ", ")
}

// isEmpty: the file holds nothing (a file error refused before the
// control plane started logged nothing), or cannot be read.
func isEmpty(path string) bool {
	info, err := os.Stat(path)
	return err != nil || info.Size() == 0
}
