package perf

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Quality of placement, measured on what the scheduler left in the API
// server at the end of each of our workloads, before the harness stops it.

// qualityResult is written next to the harness's data items as
// quality_<scheduler>_<test case>_<workload>.json.
type qualityResult struct {
	Workload  string             `json:"workload"` // "<test case>/<workload>"
	Scheduler string             `json:"scheduler"`
	Metrics   map[string]float64 `json:"metrics"`
}

// qualityHook measures the workloads of our own suite (ours) and the
// pod-group ones; upstream's others get throughput only.
func qualityHook(scheduler string, ours bool) perf.HookFn {
	return func(tCtx ktesting.TContext) error {
		// .../<suite>_<scheduler>/<test case>/<workload>
		parts := strings.Split(tCtx.Name(), "/")
		if len(parts) < 2 {
			return nil
		}
		testCase := parts[len(parts)-2]
		workload := testCase + "/" + parts[len(parts)-1]
		groups := slices.Contains([]string{"NVL72Groups", "TopologyAwareScheduling", "GangScheduling"}, testCase)
		if !ours && !groups {
			return nil // upstream's workloads: throughput only
		}
		before, err := gatherHistogram(podGroupAlgorithmMetric)
		if err != nil {
			return err
		}
		tCtx.CleanupCtx(func(tCtx ktesting.TContext) {
			metrics := map[string]float64{}
			if ours {
				m, err := measure(tCtx, testCase)
				if err != nil {
					tCtx.Errorf("quality of %s: %v", workload, err)
					return
				}
				metrics = m
			}
			if groups {
				after, err := gatherHistogram(podGroupAlgorithmMetric)
				if err != nil {
					tCtx.Errorf("quality of %s: %v", workload, err)
					return
				}
				if p50, p99, ok := quantilesSince(before, after); ok {
					metrics["podgroup-algorithm-p50-ms"], metrics["podgroup-algorithm-p99-ms"] = p50, p99
				}
			}
			if err := writeQuality(qualityResult{Workload: workload, Scheduler: scheduler, Metrics: metrics}); err != nil {
				tCtx.Errorf("quality of %s: %v", workload, err)
			}
		})
		return nil
	}
}

func writeQuality(q qualityResult) error {
	dir := "."
	if f := flag.Lookup("data-items-dir"); f != nil && f.Value.String() != "" {
		dir = f.Value.String()
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	data, err := json.MarshalIndent(q, "", "  ")
	if err != nil {
		return err
	}
	name := fmt.Sprintf("quality_%s_%s.json", q.Scheduler, strings.ReplaceAll(q.Workload, "/", "_"))
	return os.WriteFile(filepath.Join(dir, name), data, 0o640)
}

// stream is the workload's pods in arrival order (their seq label) with
// their claims' devices.
type streamPod struct {
	seq     int
	node    string
	devices []string // pool/device
}

func measure(tCtx ktesting.TContext, testCase string) (map[string]float64, error) {
	if testCase == "NVL72Groups" {
		return measureGroups(tCtx)
	}
	pods, err := tCtx.Client().CoreV1().Pods("test").List(tCtx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := tCtx.Client().ResourceV1().ResourceClaims("test").List(tCtx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices, err := tCtx.Client().ResourceV1().ResourceSlices().List(tCtx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	stream := streamOf(pods.Items, claims.Items)
	switch testCase {
	case "GPUFleet", "GPUFleetExtended":
		m := linkQuality(stream, slices.Items)
		whole, placed := 0, 0
		for _, p := range pods.Items {
			if p.Labels["gputopo.io/gpus"] == "8" {
				whole++
				if p.Spec.NodeName != "" {
					placed++
				}
			}
		}
		m["8-gpu-claims-placed"] = float64(placed)
		m["8-gpu-claims"] = float64(whole)
		return m, nil
	case "MixedFleet":
		return cpuPodsOnGPUNodes(pods.Items, slices.Items), nil
	case "MIGStream":
		return probe(tCtx, stream, func(seq int) string { return "mig-" + migCycle[seq%len(migCycle)] })
	default:
		return probe(tCtx, stream, func(seq int) string { return "share-" + shareCycle[seq%len(shareCycle)] })
	}
}

// cpuPodsOnGPUNodes counts the pods without claims (pod-cpu.yaml) and how
// many of them run on a node with a ResourceSlice, where their cores are
// gone for the GPU pods to come.
func cpuPodsOnGPUNodes(pods []v1.Pod, slices []resourceapi.ResourceSlice) map[string]float64 {
	gpuNodes := map[string]bool{}
	for _, s := range slices {
		if s.Spec.NodeName != nil {
			gpuNodes[*s.Spec.NodeName] = true
		}
	}
	var cpuPods, onGPUNodes int
	for _, p := range pods {
		if _, ok := p.Labels["gputopo.io/cpu"]; !ok {
			continue
		}
		cpuPods++
		if gpuNodes[p.Spec.NodeName] {
			onGPUNodes++
		}
	}
	return map[string]float64{"cpu-pods": float64(cpuPods), "cpu-pods-on-gpu-nodes": float64(onGPUNodes)}
}

// The streams of pod-mig.yaml and pod-share.yaml: claim template by
// position in the stream.
var (
	migCycle   = []string{"1g", "2g", "1g", "3g", "4g", "1g", "2g", "1g", "3g", "7g"}
	shareCycle = []string{"10gi", "20gi", "30gi", "50gi", "10gi", "20gi", "40gi", "10gi"}
)

// probe continues the measured stream one pod at a time, each waited for
// until bound or found unschedulable, and counts the requests served
// before the first rejection. One at a time makes the order exact (the
// harness creates pods 30 at once).
func probe(tCtx ktesting.TContext, stream []streamPod, template func(seq int) string) (map[string]float64, error) {
	served := 0
	for _, p := range stream {
		if p.node == "" {
			return map[string]float64{"served-before-first-rejection": float64(served)}, nil
		}
		served++
	}
	pods := tCtx.Client().CoreV1().Pods("test")
	for seq := len(stream); seq < 20*len(stream)+100; seq++ {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", seq), Labels: map[string]string{"gputopo.io/seq": strconv.Itoa(seq)}},
			Spec: v1.PodSpec{
				Containers:     []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10.1", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "dev"}}}}},
				ResourceClaims: []v1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: ptr.To(template(seq))}},
			},
		}
		if _, err := pods.Create(tCtx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		bound, err := settle(tCtx, pod.Name)
		if err != nil {
			return nil, err
		}
		if !bound {
			break
		}
		served++
	}
	return map[string]float64{"served-before-first-rejection": float64(served)}, nil
}

// settle waits until the pod is bound (true) or unschedulable (false).
func settle(tCtx ktesting.TContext, name string) (bool, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := tCtx.Client().CoreV1().Pods("test").Get(tCtx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return true, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				return false, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false, fmt.Errorf("pod %s neither bound nor unschedulable after a minute", name)
}

func streamOf(pods []v1.Pod, claims []resourceapi.ResourceClaim) []streamPod {
	devicesOf := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			devicesOf[c.Name] = append(devicesOf[c.Name], r.Pool+"/"+r.Device)
		}
	}
	var out []streamPod
	for _, p := range pods {
		seq, err := strconv.Atoi(p.Labels["gputopo.io/seq"])
		if err != nil {
			continue
		}
		sp := streamPod{seq: seq, node: p.Spec.NodeName}
		for _, s := range p.Status.ResourceClaimStatuses {
			sp.devices = append(sp.devices, devicesOf[ptr.Deref(s.ResourceClaimName, "")]...)
		}
		if s := p.Status.ExtendedResourceClaimStatus; s != nil {
			sp.devices = append(sp.devices, devicesOf[s.ResourceClaimName]...)
		}
		out = append(out, sp)
	}
	slices.SortFunc(out, func(a, b streamPod) int { return a.seq - b.seq })
	return out
}

// linkQuality: the share of multi-GPU claims whose GPUs are at the best
// link class their node could offer that many GPUs, in percent.
func linkQuality(stream []streamPod, sl []resourceapi.ResourceSlice) map[string]float64 {
	gpus := map[string]topology.GPU{} // pool/device
	byNode := map[string][]topology.GPU{}
	for _, s := range sl {
		node := ptr.Deref(s.Spec.NodeName, "")
		for _, d := range s.Spec.Devices {
			g := topology.Describe(s.Spec.Driver, node, d.Attributes)
			gpus[s.Spec.Pool.Name+"/"+d.Name] = g
			byNode[node] = append(byNode[node], g)
		}
	}
	bestFor := map[string]topology.LinkClass{} // node/n
	multi, atBest := 0, 0
	for _, p := range stream {
		if p.node == "" || len(p.devices) < 2 {
			continue
		}
		var set []topology.GPU
		for _, d := range p.devices {
			set = append(set, gpus[d])
		}
		key := fmt.Sprintf("%s/%d", p.node, len(set))
		best, ok := bestFor[key]
		if !ok {
			best = topology.BestSetClass(byNode[p.node], len(set))
			bestFor[key] = best
		}
		multi++
		if topology.WorstPair(set) <= best {
			atBest++
		}
	}
	if multi == 0 {
		return map[string]float64{"multi-gpu-claims": 0}
	}
	return map[string]float64{"multi-gpu-claims": float64(multi), "best-link-class-percent": 100 * float64(atBest) / float64(multi)}
}
