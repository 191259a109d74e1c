package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/controlplane"
)

// memoryNodesEnv asks TestSchedulerMemory for a fleet of that many nodes
// (make bench-memory); without it the test is skipped, as it is a
// benchmark of several minutes.
const memoryNodesEnv = "GPUTOPO_MEMORY_NODES"

// TestSchedulerMemory measures the scheduler process's peak resident
// memory on a large GPU fleet, installed as the cluster's scheduler (both
// profiles), next to the same binary running only kube-scheduler's
// in-tree plugins on the same API server, and fails when gputopo's
// passes the memory limit its Deployment ships. Half the
// nodes are DGX H100 (NVSwitch), half PCIe H100 NVL pair servers, 8 GPUs
// each; each scheduler places pods of 1, 2 and 4 GPUs (one per 2.5
// nodes) on its own half of the fleet, while both cache all of it.
func TestSchedulerMemory(t *testing.T) {
	nodes, err := strconv.Atoi(os.Getenv(memoryNodesEnv))
	if err != nil || nodes < 2 {
		t.Skipf("set %s to the fleet's size (at least 2) to measure: make bench-memory", memoryNodesEnv)
	}
	limit := shippedMemoryLimit(t)
	c := startCluster(t)
	c.deviceClasses()
	start := time.Now()
	c.memoryFleet(nodes)
	t.Logf("%d nodes and their slices created in %s", nodes, time.Since(start).Round(time.Second))

	kubeconfig := c.schedulerKubeconfig(bothProfiles)
	// The recommended install: one process serving default-scheduler and
	// gputopo-scheduler (no pod asks for the first here).
	ours := c.runScheduler("gputopo", schedulerConfig(t, bothProfiles, kubeconfig))
	intree := c.runScheduler("intree", schedulerConfigWith(t, gputopoOnly, kubeconfig, func(cfg map[string]any) {
		cfg["profiles"] = []any{map[string]any{"schedulerName": "intree-scheduler"}}
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
	}))
	const ns = "default"
	for _, n := range []int64{1, 2, 4} {
		c.create(gpuTemplate(ns, fmt.Sprintf("gpus-%d", n), contract.ClassGPU, n))
	}
	pods := nodes * 2 / 5
	start = time.Now()
	placed := map[string]int{}
	for sched, half := range map[string]string{"gputopo-scheduler": "a", "intree-scheduler": "b"} {
		for i := range pods {
			p := podWithTemplate(ns, fmt.Sprintf("%s-%d", half, i), fmt.Sprintf("gpus-%d", []int{1, 2, 4}[i%3]), sched)
			p.Spec.NodeSelector = map[string]string{"half": half}
			c.create(p)
		}
	}
	// Every 2 s: a list of thousands of pods is itself load.
	err = wait.PollUntilContextTimeout(c.ctx, 2*time.Second, 20*time.Minute, false, func(context.Context) (bool, error) {
		list, err := c.client.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		clear(placed)
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				placed[p.Spec.SchedulerName]++
			}
		}
		return placed["gputopo-scheduler"] == pods && placed["intree-scheduler"] == pods, nil
	})
	if err != nil {
		t.Fatalf("pods placed of %d per scheduler: %v: %v", pods, placed, err)
	}
	t.Logf("%d pods per scheduler placed in %s", pods, time.Since(start).Round(time.Second))

	peak := map[string]int64{}
	for name, p := range map[string]*process{"gputopo": ours, "intree": intree} {
		if done, how := p.exited(); done {
			t.Fatalf("the %s scheduler exited: %s", name, how)
		}
		peak[name] = peakRSS(t, p.cmd.Process.Pid)
	}
	mib := func(b int64) int64 { return b >> 20 }
	fmt.Printf("MEMORY SchedulerPeakRSS/%dnodes MiB intree=%d gputopo=%d ratio=%.2f limit=%d\n",
		nodes, mib(peak["intree"]), mib(peak["gputopo"]), float64(peak["gputopo"])/float64(peak["intree"]), mib(limit.Value()))
	if peak["gputopo"] > limit.Value() {
		t.Errorf("gputopo's scheduler peaked at %d MiB resident on %d nodes, above the %s limit its Deployment ships", mib(peak["gputopo"]), nodes, limit.String())
	}
}

// memoryFleet creates the nodes and their slices, half labelled
// half=a, half half=b, several at a time.
func (c *cluster) memoryFleet(nodes int) {
	c.t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("n%05d", i)
				half, slice := "a", nvswitchNode(name)
				if i%2 == 1 {
					half, slice = "b", pairNode(name)
				}
				err := controlplane.CreateNode(c.ctx, c.client, name, map[string]string{"half": half}, resource.MustParse("256"), resource.MustParse("2Ti"))
				if err == nil {
					_, err = c.client.ResourceV1().ResourceSlices().Create(c.ctx, slice, metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("node %s: %w", name, err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := range nodes {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		c.t.Fatalf("creating the fleet: %v (and %d more)", errs[0], len(errs)-1)
	}
}

// shippedMemoryLimit is the scheduler container's memory limit in the
// Deployment the manifests install.
func shippedMemoryLimit(t *testing.T) resource.Quantity {
	t.Helper()
	raw, err := os.ReadFile("../../manifests/scheduler/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(raw, &d); err != nil {
		t.Fatalf("the scheduler's Deployment: %v", err)
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if q, ok := ctr.Resources.Limits[v1.ResourceMemory]; ok {
			return q
		}
	}
	t.Fatal("the scheduler's Deployment sets no memory limit")
	return resource.Quantity{}
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("peak memory of process %d: %v", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM of process %d: %q", pid, v)
			}
			return kb << 10
		}
	}
	t.Fatalf("process %d reports no VmHWM", pid)
	return 0
}
