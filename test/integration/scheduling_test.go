package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/topology"
)

// linkClass is the worst link class between the devices ("pool/device"),
// from the attributes in the API server's slices.
func (c *cluster) linkClass(devices []string) topology.LinkClass {
	c.t.Helper()
	slices, err := c.client.ResourceV1().ResourceSlices().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var set []topology.GPU
	for _, id := range devices {
		pool, name, _ := strings.Cut(id, "/")
		for _, s := range slices.Items {
			if s.Spec.Pool.Name != pool {
				continue
			}
			for _, d := range s.Spec.Devices {
				if d.Name == name {
					set = append(set, topology.Describe(s.Spec.Driver, ptr.Deref(s.Spec.NodeName, ""), d.Attributes))
				}
			}
		}
	}
	if len(set) != len(devices) {
		c.t.Fatalf("devices %v: found %d in slices", devices, len(set))
	}
	return topology.WorstPair(set)
}

// (c) Tensor-parallel claims of 2, 4 and 8 GPUs get the best link class;
// the same pods through the default profile get worse placement on the
// NVLink-pair nodes, in the same test.
func TestTensorParallelLinkClass(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	for _, n := range []int64{2, 4, 8} {
		c.create(gpuTemplate(ns, fmt.Sprintf("tp%d", n), "gpu.nvidia.com", n))
	}
	type want struct{ gputopo, inTree topology.LinkClass }
	cases := map[int64]want{2: {topology.LinkNVLink, topology.LinkNUMA}, 4: {topology.LinkNUMA, topology.LinkSystem}, 8: {topology.LinkSystem, topology.LinkSystem}}
	for n := range cases {
		for _, who := range []string{"gputopo", "intree"} {
			c.node(fmt.Sprintf("pairs-%s-%d", who, n), nil)
			c.create(pairNode(fmt.Sprintf("pairs-%s-%d", who, n)))
			c.node(fmt.Sprintf("nvs-%s-%d", who, n), nil)
			c.create(nvswitchNode(fmt.Sprintf("nvs-%s-%d", who, n)))
		}
	}
	c.startScheduler()
	for n := range cases {
		for _, who := range []string{"gputopo", "intree"} {
			sched := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}[who]
			for _, shape := range []string{"pairs", "nvs"} {
				node := fmt.Sprintf("%s-%s-%d", shape, who, n)
				c.create(podOn(ns, "tp-"+node, fmt.Sprintf("tp%d", n), sched, node))
			}
		}
	}
	for n, w := range cases {
		for _, who := range []string{"gputopo", "intree"} {
			for _, shape := range []string{"pairs", "nvs"} {
				node := fmt.Sprintf("%s-%s-%d", shape, who, n)
				c.waitScheduled(ns, "tp-"+node)
				var devs []string
				c.waitFor("allocation of tp-"+node, 30*time.Second, func() (bool, error) {
					devs = c.devicesByPod(ns)["tp-"+node]
					return len(devs) == int(n), nil
				})
				got := c.linkClass(devs)
				want := w.gputopo
				switch {
				case shape == "nvs":
					want = topology.LinkNVLink // every set on NVSwitch is NVLink
				case who == "intree":
					want = w.inTree
				}
				if got != want {
					t.Errorf("%d GPUs on %s via %s: link class %s (devices %v), want %s", n, node, who, got, devs, want)
				}
			}
		}
	}
	c.checkNoDoubleBooking()
}

// (d) Overlapping MIG partitions are never double-booked; deleting pods
// frees the counters and later pods use them.
func TestMIGPartitions(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	c.node("mig", nil)
	for _, s := range migNode("mig", 2) {
		c.create(s)
	}
	profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	for _, p := range profiles {
		c.create(migTemplate(ns, p))
	}
	c.startScheduler()
	// More than fits: 2 GPUs hold at most 14 compute slices; these ask 20.
	stream := []string{"3g.40gb", "3g.40gb", "4g.40gb", "2g.20gb", "1g.10gb", "1g.10gb", "4g.40gb", "2g.20gb", "1g.10gb"}
	var names []string
	for i, p := range stream {
		name := fmt.Sprintf("mig-%d", i)
		names = append(names, name)
		c.create(podWithTemplate(ns, name, "mig-"+strings.ReplaceAll(p, ".", ""), "gputopo-scheduler"))
	}
	// Wait until every pod is bound or rejected.
	var bound []string
	c.waitFor("MIG pods settled", 60*time.Second, func() (bool, error) {
		bound = bound[:0]
		settled := 0
		for _, n := range names {
			p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			switch {
			case p.Spec.NodeName != "":
				bound = append(bound, n)
				settled++
			case c.schedulingMessage(ns, n) != "":
				settled++
			}
		}
		return settled == len(names), nil
	})
	if len(bound) == 0 || len(bound) == len(names) {
		t.Fatalf("%d of %d pods bound: the stream must fill the GPUs and overflow", len(bound), len(names))
	}
	c.checkNoDoubleBooking()
	for _, n := range names {
		if msg := c.schedulingMessage(ns, n); msg != "" && !strings.Contains(msg, "shared counters exhausted") {
			t.Errorf("pod %s pending with %q, want a reason naming exhausted shared counters", n, msg)
		}
	}

	// Delete every pod, the pending ones first: they would take the
	// counters the bound ones free, and one deleted while being bound
	// leaves its claim allocated until the garbage collector, which does
	// not run here, deletes the claim. Their claims get released and
	// full GPUs fit again.
	pending := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(bound, n) })
	for _, n := range append(pending, bound...) {
		if err := c.client.CoreV1().Pods(ns).Delete(c.ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	c.create(podWithTemplate(ns, "whole-0", "mig-7g80gb", "gputopo-scheduler"), podWithTemplate(ns, "whole-1", "mig-7g80gb", "gputopo-scheduler"))
	c.waitScheduled(ns, "whole-0", "whole-1")
	c.checkNoDoubleBooking()
}

// (e) Shared GPUs: pods share until capacity, rounding by the request
// policy; the next pod stays pending with a clear reason.
func TestSharedGPU(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	c.node("shared", nil)
	c.create(sharedNode("shared", 1),
		sharedTemplate(ns, "share-20gi", "20Gi"), sharedTemplate(ns, "share-7500mi", "7500Mi"), sharedTemplate(ns, "share-1gi", "1Gi"))
	// The second-scheduler configuration: only the gputopo profile.
	c.startSchedulerWith(gputopoOnly)
	c.create(podWithTemplate(ns, "a", "share-20gi", "gputopo-scheduler"), podWithTemplate(ns, "b", "share-20gi", "gputopo-scheduler"),
		podWithTemplate(ns, "c", "share-7500mi", "gputopo-scheduler"))
	pods := c.waitScheduled(ns, "a", "b", "c")
	claim := c.claimOf(pods["c"], "dev")
	c.waitFor("allocation of c", 30*time.Second, func() (bool, error) {
		claim = c.claimOf(pods["c"], "dev")
		return claim.Status.Allocation != nil, nil
	})
	r := claim.Status.Allocation.Devices.Results[0]
	if got := r.ConsumedCapacity["memory"]; got.String() != "8Gi" || r.ShareID == nil {
		t.Errorf("7500Mi share consumed %s (share ID %v), want 8Gi rounded up by the 1Gi step", got.String(), r.ShareID)
	}
	// 20 + 20 + 8 = 48Gi: the GPU is full.
	c.create(podWithTemplate(ns, "d", "share-1gi", "gputopo-scheduler"))
	c.waitFor("d rejected", 30*time.Second, func() (bool, error) {
		return strings.Contains(c.schedulingMessage(ns, "d"), "capacity exhausted"), nil
	})
	t.Logf("pending pod d: %s", c.schedulingMessage(ns, "d"))
	c.checkNoDoubleBooking()
}

// (f) 200 pods with claims at once: every schedulable pod bound, no device
// allocated twice.
func TestManyPodsAtOnce(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	for i := range 25 {
		n := fmt.Sprintf("node-%02d", i)
		c.node(n, nil)
		if i%2 == 0 {
			c.create(nvswitchNode(n))
		} else {
			c.create(pairNode(n))
		}
	}
	c.create(gpuTemplate(ns, "one", "gpu.nvidia.com", 1), gpuTemplate(ns, "two", "gpu.nvidia.com", 2))
	c.startScheduler()
	// 120 x 1 + 40 x 2 = 200 GPUs, exactly the fleet; 40 more pods of 1
	// cannot fit.
	var all []string
	var wg sync.WaitGroup
	mk := func(name, tmpl string) {
		all = append(all, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.create(podWithTemplate(ns, name, tmpl, "gputopo-scheduler"))
		}()
	}
	for i := range 120 {
		mk(fmt.Sprintf("one-%03d", i), "one")
	}
	for i := range 40 {
		mk(fmt.Sprintf("two-%03d", i), "two")
	}
	for i := range 40 {
		mk(fmt.Sprintf("extra-%03d", i), "one")
	}
	wg.Wait()
	var bound int
	c.waitFor("all GPUs allocated", 120*time.Second, func() (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound = 0
		gpus := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
				gpus++
				if strings.HasPrefix(p.Name, "two-") {
					gpus++
				}
			}
		}
		return gpus == 200, nil
	})
	t.Logf("%d pods bound, using all 200 GPUs", bound)
	c.checkNoDoubleBooking()
	// Everything left waits with a reason.
	pods, err := c.client.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			c.waitFor("reason for "+p.Name, 30*time.Second, func() (bool, error) { return c.schedulingMessage(ns, p.Name) != "", nil })
		}
	}
}

// (g) The scheduler stops mid-run and a new one starts: no device twice,
// no in-flight reservation leaked, every pod bound or pending with a
// reason.
func TestSchedulerRestart(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	for i := range 6 {
		n := fmt.Sprintf("node-%d", i)
		c.node(n, nil)
		c.create(pairNode(n))
	}
	c.create(gpuTemplate(ns, "two", "gpu.nvidia.com", 2))
	stop := c.startScheduler()
	var names []string
	for i := range 30 { // 60 GPUs asked, 48 exist
		names = append(names, fmt.Sprintf("p-%02d", i))
		c.create(podWithTemplate(ns, names[i], "two", "gputopo-scheduler"))
	}
	// Stop once some, not all, are bound.
	c.waitFor("some pods bound", 60*time.Second, func() (bool, error) {
		n, err := c.boundPods(ns)
		return n >= 3, err
	})
	stop()
	c.checkNoDoubleBooking()
	c.startScheduler()
	c.waitFor("all GPUs allocated after restart", 90*time.Second, func() (bool, error) {
		n, err := c.boundPods(ns)
		return n == 24, err
	})
	c.checkNoDoubleBooking()
	// Nothing half-written: every allocated claim is reserved by a bound
	// pod, and pending pods say why.
	claims, err := c.client.ResourceV1().ResourceClaims(ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range claims.Items {
		if cl.Status.Allocation != nil && len(cl.Status.ReservedFor) == 0 {
			t.Errorf("claim %s allocated but reserved for nobody", cl.Name)
		}
	}
	for _, n := range names {
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName == "" {
			c.waitFor("reason for "+n, 30*time.Second, func() (bool, error) { return c.schedulingMessage(ns, n) != "", nil })
		}
	}
}

// (h) Our profile and the default profile in one binary, on the same
// nodes: no device allocated twice.
func TestTwoProfilesShareDevices(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	for i := range 4 {
		n := fmt.Sprintf("node-%d", i)
		c.node(n, nil)
		c.create(nvswitchNode(n))
	}
	c.create(gpuTemplate(ns, "one", "gpu.nvidia.com", 1), gpuTemplate(ns, "three", "gpu.nvidia.com", 3))
	c.startScheduler()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 24 {
		for _, sched := range []string{"gputopo-scheduler", "default-scheduler"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tmpl := "one"
				if i%3 == 0 {
					tmpl = "three"
				}
				mu.Lock()
				defer mu.Unlock()
				c.create(podWithTemplate(ns, fmt.Sprintf("%s-%02d", strings.TrimSuffix(sched, "-scheduler"), i), tmpl, sched))
			}()
		}
	}
	wg.Wait()
	c.waitFor("all 32 GPUs allocated", 90*time.Second, func() (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		gpus := map[string]int{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				k := strings.SplitN(p.Name, "-", 2)[0]
				if p.Spec.ResourceClaims[0].ResourceClaimTemplateName != nil && *p.Spec.ResourceClaims[0].ResourceClaimTemplateName == "three" {
					gpus[k] += 3
				} else {
					gpus[k]++
				}
			}
		}
		return gpus["gputopo"]+gpus["default"] >= 30 && gpus["gputopo"] > 0 && gpus["default"] > 0, nil
	})
	c.checkNoDoubleBooking()
}

// boundPods counts the namespace's pods that have a node.
func (c *cluster) boundPods(ns string) (int, error) {
	pods, err := c.client.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}
