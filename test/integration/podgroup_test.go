package integration

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/controlplane"
)

// Pod groups on GB200 NVL72 racks (2 racks x 18 trays x 4 GPUs per
// fleet), with the gates of manifests/pod-groups on the API server and
// the scheduler.

// podGroupGates is the --feature-gates flag the pod-groups overlay adds
// to the scheduler's Deployment.
func podGroupGates(t *testing.T) string {
	t.Helper()
	gates, err := controlplane.PodGroupGates()
	if err != nil {
		t.Fatal(err)
	}
	return gates
}

// startPodGroupCluster: the API server with the gates and API group the
// overlay's documentation asks for (the in-process API server reads the
// process's gates).
func startPodGroupCluster(t *testing.T) *cluster {
	t.Helper()
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
		features.DRAWorkloadResourceClaims:       true,
	})
	return startCluster(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
}

// nvl72Fleet creates racks NVL72 racks of 18 trays for a fleet: nodes
// labeled fleet=<name>, each rack one clique. withLabel also writes the
// clique as the node label (what the in-tree generator reads); without
// it only the GPUs' cliqueID attribute says it.
func (c *cluster) nvl72Fleet(name string, racks int, withLabel bool) map[string]string {
	c.t.Helper()
	cliqueOf := map[string]string{}
	for r := range racks {
		clique := fmt.Sprintf("%s-cluster.%d", name, r)
		for tr := range 18 {
			node := fmt.Sprintf("%s-r%d-t%02d", name, r, tr)
			labels := map[string]string{"fleet": name}
			if withLabel {
				labels[contract.LabelClique] = clique
			}
			c.node(node, labels)
			c.create(nvl72Tray(node, clique))
			cliqueOf[node] = clique
		}
	}
	return cliqueOf
}

// podGroup creates a gang of minCount pods asking for one clique.
func (c *cluster) podGroup(ns, name string, minCount int32) {
	c.t.Helper()
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: contract.LabelClique}}},
		},
	}
	if _, err := c.client.SchedulingV1beta1().PodGroups(ns).Create(c.ctx, pg, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create PodGroup %s/%s: %v", ns, name, err)
	}
}

// groupPods creates pods first..first+n-1 of a group ("" for no group):
// 4 GPUs each, on the fleet's nodes.
func (c *cluster) groupPods(ns, group, scheduler, fleet string, first, n int) []string {
	c.t.Helper()
	var names []string
	for i := first; i < first+n; i++ {
		p := podWithTemplate(ns, fmt.Sprintf("%s-%d", group, i), "gb200x4", scheduler)
		p.Spec.NodeSelector = map[string]string{"fleet": fleet}
		if !strings.HasPrefix(group, "solo") {
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		}
		c.create(p)
		names = append(names, p.Name)
	}
	return names
}

// boundWithin waits up to timeout for every pod to be bound and returns
// whether they were and their nodes.
func (c *cluster) boundWithin(ns string, pods []string, timeout time.Duration) (bool, map[string]string) {
	c.t.Helper()
	nodes := map[string]string{}
	deadline := time.Now().Add(timeout)
	for {
		for _, n := range pods {
			if nodes[n] != "" {
				continue
			}
			if p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, n, metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
				nodes[n] = p.Spec.NodeName
			}
		}
		if len(nodes) == len(pods) || time.Now().After(deadline) {
			return len(nodes) == len(pods), nodes
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deletePods removes pods at once (no kubelet runs to confirm a graceful
// deletion); the claim controller then frees their claims.
func (c *cluster) deletePods(ns string, pods []string) {
	c.t.Helper()
	for _, n := range pods {
		if err := c.client.CoreV1().Pods(ns).Delete(c.ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			c.t.Fatalf("delete pod %s/%s: %v", ns, n, err)
		}
	}
	c.waitFor(fmt.Sprintf("claims of %d pods freed", len(pods)), 60*time.Second, func() (bool, error) {
		held := c.devicesByPod(ns)
		for _, n := range pods {
			if len(held[n]) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// groupCondition is the PodGroup's scheduling condition message.
func (c *cluster) groupCondition(ns, name string) string {
	pg, err := c.client.SchedulingV1beta1().PodGroups(ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled); cond != nil {
		return string(cond.Status) + ": " + cond.Message
	}
	return ""
}

// gangStep is one event of a stream: a group of size pods arrives, or
// the group named leaves.
type gangStep struct {
	arrive string
	size   int
	leave  string
}

// nvl72Stream: groups of 2..18 pods arriving and leaving on 2 racks.
// Placed best fit, every group finds one clique; a rack picked at random
// among those that fit (the in-tree generator's placements all score
// alike) serves them all in one run of eight (simulated).
var nvl72Stream = []gangStep{
	{arrive: "a", size: 14},
	{arrive: "b", size: 9},
	{leave: "a"},
	{arrive: "c", size: 9},
	{arrive: "d", size: 6},
	{arrive: "e", size: 4},
	{leave: "b"},
	{leave: "c"},
	{arrive: "f", size: 6},
	{arrive: "g", size: 2},
	{arrive: "h", size: 18},
}

// streamResult: per group, whether it started whole and within one
// clique.
type streamResult struct {
	served, oneClique, groups int
}

func (r streamResult) String() string {
	return fmt.Sprintf("%d/%d groups served, %d/%d of them in one clique", r.served, r.groups, r.oneClique, r.served)
}

// runStream plays the stream on a fleet: asGroups makes each group a
// PodGroup (gang, one clique); otherwise its pods are plain pods.
func (c *cluster) runStream(ns, scheduler, fleet string, cliqueOf map[string]string, asGroups bool) streamResult {
	c.t.Helper()
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuTemplate(ns, "gb200x4", contract.ClassGPU, 4))
	pods := map[string][]string{}
	var r streamResult
	for _, s := range nvl72Stream {
		if s.leave != "" {
			c.deletePods(ns, pods[s.leave])
			continue
		}
		name := s.arrive
		if asGroups {
			c.podGroup(ns, name, int32(s.size))
		} else {
			name = "solo-" + name
		}
		pods[s.arrive] = c.groupPods(ns, name, scheduler, fleet, 0, s.size)
		r.groups++
		ok, nodes := c.boundWithin(ns, pods[s.arrive], 30*time.Second)
		if !ok {
			if asGroups && len(nodes) > 0 {
				c.t.Errorf("%s: group %s started in part (%d of %d pods bound)", ns, name, len(nodes), s.size)
			}
			c.t.Logf("%s: group %s (%d pods) not served: %s", ns, name, s.size, c.groupCondition(ns, name))
			// It stays pending whole; the stream goes on without it.
			c.deletePods(ns, pods[s.arrive])
			delete(pods, s.arrive)
			continue
		}
		r.served++
		cliques := map[string]bool{}
		for _, n := range nodes {
			cliques[cliqueOf[n]] = true
		}
		if len(cliques) == 1 {
			r.oneClique++
		}
	}
	return r
}

// The same stream of NVL72 pod groups through three schedulers in one
// scheduler process: gputopo's profile with GPUCliquePlacement (cliques
// from the GPUs' DRA attributes only), the default profile with the
// in-tree TopologyPlacementGenerator (cliques from the node label), and
// gputopo's profile with the same pods but no PodGroup. gputopo serves
// every group of the stream whole within one clique.
func TestPodGroupsInNVL72Cliques(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	ours := c.nvl72Fleet("ours", 2, false)
	intree := c.nvl72Fleet("intree", 2, true)
	plain := c.nvl72Fleet("plain", 2, false)
	c.runScheduler("podgroups", schedulerConfig(t, bothProfiles, c.schedulerKubeconfig(bothProfiles)), podGroupGates(t))

	got := c.runStream("ours", "gputopo-scheduler", "ours", ours, true)
	base := c.runStream("intree", "default-scheduler", "intree", intree, true)
	solo := c.runStream("plain", "gputopo-scheduler", "plain", plain, false)
	t.Logf("GPUCliquePlacement: %s", got)
	t.Logf("in-tree TopologyPlacementGenerator: %s", base)
	t.Logf("no pod groups (gputopo per pod): %s", solo)
	if got.served != got.groups || got.oneClique != got.served {
		t.Errorf("GPUCliquePlacement: %s, want every group served in one clique", got)
	}
	// The in-tree generator on the same stream, for the comparison to
	// mean something: it serves groups, each in one clique (its topology
	// constraint), and no more than gputopo.
	if base.served == 0 || base.oneClique != base.served || base.served > got.served {
		t.Errorf("in-tree TopologyPlacementGenerator: %s, want groups served, each in one clique, and no more than GPUCliquePlacement's %d", base, got.served)
	}
	c.checkNoDoubleBooking()
}

// Groups that cannot be placed wait whole, hold nothing and say why; a
// group is pinned to its clique across a scheduler restart.
func TestPodGroupsBadInputAndRestart(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	cliqueOf := c.nvl72Fleet("f", 2, false)
	const ns = "groups"
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuTemplate(ns, "gb200x4", contract.ClassGPU, 4))
	kubeconfig := c.schedulerKubeconfig(bothProfiles)
	sched := c.runScheduler("podgroups", schedulerConfig(t, bothProfiles, kubeconfig), podGroupGates(t))

	// Larger than a clique: pending whole, with the reason.
	c.podGroup(ns, "huge", 20)
	huge := c.groupPods(ns, "huge", "gputopo-scheduler", "f", 0, 20)
	c.waitFor("huge's reason", 60*time.Second, func() (bool, error) {
		return strings.Contains(c.schedulingMessage(ns, huge[0]), "needs at least 80 free GPUs in one "+contract.LabelClique+" domain; the most free in one is 72, and the largest holds 72 GPUs in all"), nil
	})
	// A gang that never fills: 3 of 4 pods. The in-tree GangScheduling
	// plugin keeps them out of the queue (PreEnqueue) until the fourth
	// arrives: they are never tried and hold nothing.
	c.podGroup(ns, "short", 4)
	short := c.groupPods(ns, "short", "gputopo-scheduler", "f", 0, 3)
	// Pods that select different cliques.
	c.podGroup(ns, "split", 2)
	var split []string
	for i := range 2 {
		p := podWithTemplate(ns, fmt.Sprintf("split-%d", i), "gb200x4", "gputopo-scheduler")
		p.Spec.NodeSelector = map[string]string{"fleet": "f", contract.LabelClique: fmt.Sprintf("f-cluster.%d", i)}
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("split")}
		c.create(p)
		split = append(split, p.Name)
	}
	c.waitFor("split's reason", 60*time.Second, func() (bool, error) {
		return strings.Contains(c.schedulingMessage(ns, split[0]), "select different "+contract.LabelClique+" values"), nil
	})
	// A group placed in part (minCount 2 of 4 pods), then the scheduler
	// restarts and the rest arrives: it joins the same clique.
	c.podGroup(ns, "grow", 2)
	first := c.groupPods(ns, "grow", "gputopo-scheduler", "f", 0, 2)
	ok, nodes := c.boundWithin(ns, first, 60*time.Second)
	if !ok {
		t.Fatalf("grow's first pods not bound: %s", c.schedulingMessage(ns, first[0]))
	}
	sched.stop(syscall.SIGTERM)
	c.runScheduler("podgroups-restarted", schedulerConfig(t, bothProfiles, kubeconfig), podGroupGates(t))
	rest := c.groupPods(ns, "grow", "gputopo-scheduler", "f", 2, 2)
	ok, more := c.boundWithin(ns, rest, 60*time.Second)
	if !ok {
		t.Fatalf("grow's other pods not bound: %s", c.schedulingMessage(ns, rest[0]))
	}
	want := cliqueOf[nodes[first[0]]]
	for p, n := range map[string]string{first[0]: nodes[first[0]], first[1]: nodes[first[1]], rest[0]: more[rest[0]], rest[1]: more[rest[1]]} {
		if cliqueOf[n] != want {
			t.Errorf("pod %s on %s in clique %s, want the group's clique %s", p, n, cliqueOf[n], want)
		}
	}

	// None of the waiting groups holds a device or a node.
	held := c.devicesByPod(ns)
	for _, p := range append(append(huge, short...), split...) {
		pod, err := c.client.CoreV1().Pods(ns).Get(c.ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != "" || len(held[p]) > 0 {
			t.Errorf("pod %s of a waiting group is bound to %q or holds %v", p, pod.Spec.NodeName, held[p])
		}
	}
	// kubectl gputopo why, as the read-only viewer, says why each waits.
	viewer := c.serviceAccountKubeconfig("gputopo-system", "gputopo-viewer", "../../manifests/kubectl")
	for pod, want := range map[string]string{
		"short-0": "waiting for 1 more pod(s) of the group to exist before the scheduler tries it",
		"huge-0":  "PodGroupInitiallyScheduled=False (Unschedulable): the pod group needs at least 80 free GPUs in one nvidia.com/gpu.clique domain",
		"split-0": "select different nvidia.com/gpu.clique values",
	} {
		out, err := exec.CommandContext(c.ctx, kubectlBinary, "why", pod, "-n", ns, "--kubeconfig", viewer).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("kubectl gputopo why %s: %v\n%s\nwant %q", pod, err, out, want)
		}
		t.Logf("kubectl gputopo why %s:\n%s", pod, out)
	}
	c.checkNoDoubleBooking()
}

// manifests/nodeagent-clique-label: the agents, run as their DaemonSet's
// pods, label their nodes with the rack's clique (the value their slices
// publish), and may change nothing else of any node.
func TestNodeAgentCliqueLabel(t *testing.T) {
	c := startCluster(t)
	c.apply("../../manifests/nodeagent", "")
	// kubectl apply -k of the overlay replaces the base's ConfigMap and
	// adds the label's RBAC and admission policy; its DaemonSet patch only
	// marks the pod template, so that the pods restart (the agents here
	// are processes).
	c.replaceAgentConfigMap("../../manifests/nodeagent-clique-label/configmap.yaml")
	for _, f := range []string{"rbac.yaml", "admission-policy.yaml"} {
		c.apply("../../manifests/nodeagent-clique-label/"+f, "")
	}
	trays := []string{"tray-0", "tray-1"}
	for _, n := range trays {
		c.node(n, map[string]string{"team": "a"})
		c.runAgentProcess(n, "gb200-tray", "--mock-rack=rack-7")
	}
	var clique string
	for _, n := range trays {
		c.waitFor("clique label of "+n, 60*time.Second, func() (bool, error) {
			node, err := c.client.CoreV1().Nodes().Get(c.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got := node.Labels[contract.LabelClique]
			if got == "" {
				return false, nil
			}
			if clique != "" && got != clique {
				return false, fmt.Errorf("node %s in clique %q, tray-0 in %q", n, got, clique)
			}
			clique = got
			return true, nil
		})
	}
	slices, err := c.client.ResourceV1().ResourceSlices().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[contract.AttrCliqueID]; ok && ptr.Deref(a.StringValue, "") != clique {
				t.Errorf("device %s/%s publishes clique %q, the node label says %q", s.Spec.Pool.Name, d.Name, ptr.Deref(a.StringValue, ""), clique)
			}
		}
	}

	probe := c.agentProbeClient("tray-0")
	for what, patch := range map[string]struct{ node, body string }{
		"another node's clique": {"tray-1", `{"metadata":{"labels":{"nvidia.com/gpu.clique":"rack-0"}}}`},
		"another label":         {"tray-0", `{"metadata":{"labels":{"team":"b"}}}`},
		"its node's spec":       {"tray-0", `{"spec":{"unschedulable":true}}`},
	} {
		_, err := probe.CoreV1().Nodes().Patch(c.ctx, patch.node, types.StrategicMergePatchType, []byte(patch.body), metav1.PatchOptions{})
		if err == nil || !strings.Contains(err.Error(), "gputopo-nodeagent-own-node-clique-label") {
			t.Errorf("agent of tray-0 changing %s: %v, want a denial by the admission policy", what, err)
		}
	}
	// What the agent does when its tray moves to another rack's fabric,
	// and when the fabric fails: change, then remove, its node's label.
	for _, step := range []struct{ what, body string }{
		{"moves its node to another clique", `{"metadata":{"labels":{"nvidia.com/gpu.clique":"rack-8.1"}}}`},
		{"removes its node's clique", `{"metadata":{"labels":{"nvidia.com/gpu.clique":null}}}`},
	} {
		if _, err := probe.CoreV1().Nodes().Patch(c.ctx, "tray-0", types.StrategicMergePatchType, []byte(step.body), metav1.PatchOptions{}); err != nil {
			t.Errorf("agent of tray-0 %s: %v, want it allowed", step.what, err)
		}
	}
}

// A claim that the pods of a group share (here one GPU for the whole
// group) is allocated once, in the group's cycle, and reserved for every
// pod of it; the in-tree plugin on the same API server state, in the same
// scheduler process, does the same.
func TestPodGroupSharedClaim(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	profiles := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who, sched := range profiles {
		ns, node := "shared-"+who, who+"-0"
		c.node(node, map[string]string{"fleet": who})
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "group-gpu"},
			Spec:       gpuTemplate(ns, "x", contract.ClassGPU, 1).Spec.Spec,
		}
		c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, pairNode(node), claim)
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
		}
		if _, err := c.client.SchedulingV1beta1().PodGroups(ns).Create(c.ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			p := podWithTemplate(ns, fmt.Sprintf("p-%d", i), "unused", sched)
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To("group-gpu")}}
			p.Spec.NodeSelector = map[string]string{"fleet": who}
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
			c.create(p)
		}
	}
	c.runScheduler("podgroups", schedulerConfig(t, bothProfiles, c.schedulerKubeconfig(bothProfiles)), podGroupGates(t))
	for who := range profiles {
		ns := "shared-" + who
		pods := c.waitScheduled(ns, "p-0", "p-1")
		claim, err := c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, "group-gpu", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var reserved []string
		for _, r := range claim.Status.ReservedFor {
			reserved = append(reserved, r.Name)
		}
		slices.Sort(reserved)
		if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 || !slices.Equal(reserved, []string{"p-0", "p-1"}) {
			t.Errorf("%s: claim allocation %v, reserved for %v; want one GPU reserved for p-0 and p-1", who, claim.Status.Allocation, reserved)
		}
		if pods["p-0"].Spec.NodeName != pods["p-1"].Spec.NodeName {
			t.Errorf("%s: the pods sharing the claim run on %s and %s", who, pods["p-0"].Spec.NodeName, pods["p-1"].Spec.NodeName)
		}
	}
	c.checkNoDoubleBooking()
}
