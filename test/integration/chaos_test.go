package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/prepare"
)

// Faults under load. A few hundred pods of whole GPUs, MIG partitions and
// shared GPUs arrive and leave on node agents' devices while the test
// kills and restarts the scheduler, restarts the API server, stops a
// node agent in the middle of a prepare, and deletes pods while they are
// scheduled. At the end every claim is scanned: no device held twice, no
// counter or capacity overdrawn, no reservation for a pod that is gone,
// every pod bound or pending with a reason, and the agents' checkpoints
// agree with the API server.
func TestChaos(t *testing.T) {
	c := startRestartableCluster(t)
	c.deviceClasses()
	c.apply("../../manifests/nodeagent", "")
	const ns = "default"
	k := &simKubelet{c: c, ns: ns, agents: map[string]*agent.Agent{}, libs: map[string]*mocknvml.Server{}, dirs: map[string]string{}, nodes: map[string]simNode{}}
	for _, n := range []simNode{
		{"dgx-h100", mocknvml.DGXH100, config.Whole, ""},
		{"pcie-pairs", mocknvml.PCIePairs, config.Whole, ""},
		{"a100-mig", mocknvml.DGXA100, config.MIG, ""},
		{"h200-shared", mocknvml.DGXH200, config.Shared, ""},
	} {
		c.node(n.name, nil)
		k.start(n)
	}
	t.Cleanup(k.stopAll)
	templates := []string{"one", "two", "four", "mig-1g5gb", "mig-2g10gb", "mig-3g20gb", "share-10gi"}
	c.create(gpuTemplate(ns, "one", driver, 1), gpuTemplate(ns, "two", driver, 2), gpuTemplate(ns, "four", driver, 4),
		migTemplate(ns, "1g.5gb"), migTemplate(ns, "2g.10gb"), migTemplate(ns, "3g.20gb"), sharedTemplate(ns, "share-10gi", "10Gi"))
	for _, n := range k.nodes {
		want := len(k.agents[n.name].Layout().Devices)
		c.waitFor("slices of "+n.name, 30*time.Second, func() (bool, error) {
			got, _ := c.poolDevices(n.name)
			return got == want, nil
		})
	}

	kubeconfig := c.schedulerKubeconfig(bothProfiles)
	schedConfig := schedulerConfig(t, bothProfiles, kubeconfig)
	sched := c.runScheduler("gputopo", schedConfig)
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go k.run(ctx)

	rng := rand.New(rand.NewPCG(1, 2))
	var faults []string
	fault := func(what string, do func()) {
		t.Logf("fault: %s", what)
		faults = append(faults, what)
		do()
	}
	created, deletedEarly, deletedLater := 0, 0, 0
	var live []string
	const rounds = 60 // one round about a second
	for round := range rounds {
		for range 4 {
			name := fmt.Sprintf("p-%03d", created)
			created++
			c.create(podWithTemplate(ns, name, templates[rng.IntN(len(templates))], []string{"gputopo-scheduler", v1.DefaultSchedulerName}[rng.IntN(2)]))
			if rng.IntN(8) == 0 { // deleted while it is being scheduled
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				c.deletePod(ns, name)
				deletedEarly++
				continue
			}
			live = append(live, name)
		}
		for len(live) > 0 && rng.IntN(3) > 0 { // departures
			i := rng.IntN(len(live))
			c.deletePod(ns, live[i])
			live = slices.Delete(live, i, i+1)
			deletedLater++
		}
		switch round {
		case 12, 40:
			fault("scheduler killed (SIGKILL) and restarted", func() {
				sched.stop(syscall.SIGKILL)
				sched = c.runScheduler("gputopo", schedConfig)
			})
		case 22:
			fault("API server restarted", c.apiserver.restart)
		case 30:
			fault("node agent of a100-mig stopped during a prepare and restarted", func() { k.restartDuringPrepare("a100-mig") })
		}
		time.Sleep(time.Second)
	}
	fault("scheduler stopped (SIGTERM) and restarted", func() {
		sched.stop(syscall.SIGTERM)
		sched = c.runScheduler("gputopo", schedConfig)
	})
	settled := c.waitSettled(ns, live)
	k.syncAll(c.ctx)

	report := c.scanClaims(ns)
	report.checkpoints = k.checkAgainstAPI(c.ctx)
	c.checkNoDoubleBooking()
	t.Logf("chaos: %d pods created (%d deleted while scheduled, %d after), %d alive: %d bound, %d pending with a reason; faults: %v",
		created, deletedEarly, deletedLater, len(live), settled.bound, settled.pending, faults)
	t.Logf("chaos: %d claims scanned, %d allocated, double booking or overdrawn counters found: %v; reservations of deleted pods: %d; prepared claims checked against the API server: %d, disagreeing: %d",
		report.claims, report.allocated, t.Failed(), report.staleReservations, report.checkpoints.checked, report.checkpoints.disagree)
	if report.staleReservations > 0 || report.checkpoints.disagree > 0 {
		t.Errorf("stale reservations %d, checkpoints disagreeing %d", report.staleReservations, report.checkpoints.disagree)
	}
	if settled.bound == 0 {
		t.Error("no pod bound: the load did not run")
	}
}

// deletePod deletes at once (no kubelet runs to finish a graceful one).
func (c *cluster) deletePod(ns, name string) {
	err := wait.PollUntilContextTimeout(c.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		return err == nil || apierrors.IsNotFound(err), nil
	})
	if err != nil {
		c.t.Errorf("delete pod %s: %v", name, err)
	}
}

type settledPods struct{ bound, pending int }

// waitSettled waits until every live pod is bound or has a reason.
func (c *cluster) waitSettled(ns string, live []string) settledPods {
	c.t.Helper()
	var s settledPods
	c.waitFor("every pod bound or pending with a reason", 3*time.Minute, func() (bool, error) {
		s = settledPods{}
		for _, name := range live {
			p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			switch {
			case p.Spec.NodeName != "":
				s.bound++
			case c.schedulingMessage(ns, name) != "":
				s.pending++
			default:
				return false, nil
			}
		}
		return true, nil
	})
	return s
}

type claimReport struct {
	claims, allocated, staleReservations int
	checkpoints                          checkpointReport
}

// scanClaims waits for the resourceclaim controller to drop reservations
// of deleted pods, then counts what is left.
func (c *cluster) scanClaims(ns string) claimReport {
	c.t.Helper()
	var r claimReport
	c.waitFor("no reservation for a deleted pod", 60*time.Second, func() (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		alive := sets.New[types.UID]()
		for _, p := range pods.Items {
			alive.Insert(p.UID)
		}
		claims, err := c.client.ResourceV1().ResourceClaims(ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		r = claimReport{claims: len(claims.Items)}
		for _, claim := range claims.Items {
			if claim.Status.Allocation != nil {
				r.allocated++
			}
			for _, ref := range claim.Status.ReservedFor {
				if !alive.Has(ref.UID) {
					r.staleReservations++
				}
			}
		}
		return r.staleReservations == 0, nil
	})
	return r
}

// simKubelet does the kubelet's DRA part for the node agents: it prepares
// the claims of pods bound to a node on that node's agent and unprepares
// claims no pod there uses any more.
type simKubelet struct {
	c  *cluster
	ns string
	// syncing is held by a sync round and by an agent's restart: a
	// round must not reach the stopped agent once its successor runs, or
	// two preparers would share one node's GPUs and checkpoint, which a
	// kubelet never lets happen.
	syncing sync.Mutex
	mu      sync.Mutex
	agents  map[string]*agent.Agent
	libs    map[string]*mocknvml.Server
	dirs    map[string]string
	nodes   map[string]simNode
}

func (k *simKubelet) start(n simNode) {
	lib := mockGPUs(k.c.t, n)
	dir := k.c.t.TempDir()
	a := k.c.startAgentOn(n, lib, dir)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.agents[n.name], k.libs[n.name], k.dirs[n.name], k.nodes[n.name] = a, lib, dir, n
}

func (k *simKubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, a := range k.agents {
		a.Stop()
	}
}

func (k *simKubelet) agent(node string) *agent.Agent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.agents[node]
}

// restartDuringPrepare stops the node's agent while it prepares a claim
// of a new pod there (its NVML goes away mid-way), and starts a new agent
// on the same GPUs and state directory.
func (k *simKubelet) restartDuringPrepare(node string) {
	k.syncing.Lock()
	defer k.syncing.Unlock()
	k.mu.Lock()
	old := k.agents[node]
	k.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.sync(k.c.ctx, node, old)
	}()
	time.Sleep(2 * time.Millisecond)
	old.Stop()
	<-done
	a := k.c.startAgentOn(k.nodes[node], k.libs[node], k.dirs[node])
	k.mu.Lock()
	k.agents[node] = a
	k.mu.Unlock()
}

func (k *simKubelet) run(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		k.syncAll(ctx)
		return false, nil
	})
}

func (k *simKubelet) syncAll(ctx context.Context) {
	k.syncing.Lock()
	defer k.syncing.Unlock()
	for node := range k.nodes {
		k.sync(ctx, node, k.agent(node))
	}
}

// wanted returns the claims the node's pods use, allocated and reserved.
func (k *simKubelet) wanted(ctx context.Context, node string) (map[types.UID]*resourceapi.ResourceClaim, error) {
	pods, err := k.c.client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]*resourceapi.ResourceClaim{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		for j := range pod.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[j])
			if err != nil || name == nil {
				continue
			}
			claim, err := k.c.client.ResourceV1().ResourceClaims(k.ns).Get(ctx, *name, metav1.GetOptions{})
			if err != nil || claim.Status.Allocation == nil || !resourceclaim.IsReservedForPod(pod, claim, false) {
				continue
			}
			out[claim.UID] = claim
		}
	}
	return out, nil
}

// sync prepares what the node's pods use and unprepares the rest. A
// conflict (a device prepared for two claims) fails the test: it would
// mean the scheduler handed a device out twice.
func (k *simKubelet) sync(ctx context.Context, node string, a *agent.Agent) {
	wanted, err := k.wanted(ctx, node)
	if err != nil {
		return
	}
	prepared := map[types.UID]bool{}
	for _, cl := range a.Preparer().Claims() {
		prepared[types.UID(cl.UID)] = cl.Prepared
		if _, ok := wanted[types.UID(cl.UID)]; !ok {
			_, _ = a.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: types.UID(cl.UID), NamespacedName: types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}}})
		}
	}
	var toPrepare []*resourceapi.ResourceClaim
	for uid, claim := range wanted {
		if !prepared[uid] {
			toPrepare = append(toPrepare, claim)
		}
	}
	if len(toPrepare) == 0 {
		return
	}
	res, err := a.PrepareResourceClaims(ctx, toPrepare)
	if err != nil {
		return
	}
	for uid, r := range res {
		if errors.Is(r.Err, prepare.ErrConflict) {
			k.c.t.Errorf("node %s: claim %s: %v", node, uid, r.Err)
		}
	}
}

type checkpointReport struct{ checked, disagree int }

// checkAgainstAPI compares each agent's prepared claims with what the API
// server allocated on its node for its pods.
func (k *simKubelet) checkAgainstAPI(ctx context.Context) checkpointReport {
	var r checkpointReport
	for node := range k.nodes {
		wanted, err := k.wanted(ctx, node)
		if err != nil {
			k.c.t.Fatal(err)
		}
		got := map[types.UID]bool{}
		for _, cl := range k.agent(node).Preparer().Claims() {
			r.checked++
			uid := types.UID(cl.UID)
			got[uid] = true
			claim, ok := wanted[uid]
			if !ok {
				r.disagree++
				k.c.t.Errorf("node %s: checkpoint has claim %s/%s (prepared %v), which no pod there uses", node, cl.Namespace, cl.Name, cl.Prepared)
				continue
			}
			if !cl.Prepared {
				r.disagree++
				k.c.t.Errorf("node %s: claim %s/%s of a pod there is not prepared (its prepare keeps failing)", node, cl.Namespace, cl.Name)
				continue
			}
			var want, have []string
			for _, res := range claim.Status.Allocation.Devices.Results {
				want = append(want, res.Pool+"/"+res.Device)
			}
			for _, d := range cl.Devices {
				have = append(have, d.Pool+"/"+d.Device)
			}
			slices.Sort(want)
			slices.Sort(have)
			if !slices.Equal(want, have) {
				r.disagree++
				k.c.t.Errorf("node %s: claim %s prepared with %v, allocated %v", node, cl.Name, have, want)
			}
		}
		for uid, claim := range wanted {
			if !got[uid] {
				r.disagree++
				k.c.t.Errorf("node %s: claim %s of a bound pod is not prepared", node, claim.Name)
			}
		}
	}
	return r
}
