// Package sim runs kube-scheduler inside the process on an in-memory
// API (client-go's fake clientset): the scheduler's own informers,
// queue, cache and framework, with gputopo's plugins and the in-tree
// ones, configured like the product. Pods are submitted one at a time
// and each is tried once, as the openb paper's simulator does; a
// rejected pod is deleted, so nothing retries it. Without API server
// round trips a pod takes what the scheduling cycle costs, which is what
// makes replaying every openb trace with several seeds practical.
package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

// decisionTimeout bounds the wait for one pod's decision: far more than
// a scheduling cycle takes, so that a lost pod is an error, not a hang.
var decisionTimeout = time.Minute

// Outcome is the scheduler's decision for one pod.
type Outcome struct {
	// Node the pod was bound to; empty when it was rejected.
	Node string
	// Reason is the scheduler's message for a rejected pod.
	Reason string
}

// Scheduler is kube-scheduler on a fake clientset.
type Scheduler struct {
	// Client is the in-memory API the scheduler watches.
	Client *Client

	sched   *scheduler.Scheduler
	factory informers.SharedInformerFactory
	cancel  context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	pending map[string]chan Outcome // by namespace/name

	barriers int // versions of the barrier claim written (sync)

	ledgers *ledgers
}

// Client is the in-memory API: client-go's fake clientset, with a
// resourceVersion on every write.
type Client struct {
	*fake.Clientset
	store *versioned
}

// NewClient returns an empty in-memory API for New. It is client-go's
// plain object tracker: the fake clientset's default, field-managed one
// builds a REST mapper on every write, which cost a third of a replay.
func NewClient() *Client {
	c := &Client{Clientset: &fake.Clientset{}}
	c.store = &versioned{ObjectTracker: clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())}
	c.AddReactor("*", "*", clienttesting.ObjectReaction(c.store))
	c.AddWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := c.store.Watch(action.GetResource(), action.GetNamespace(), opts)
		return err == nil, w, err
	})
	return c
}

// New starts kube-scheduler with cfg's profiles and gputopo's plugins on
// client (from NewClient), which holds the fleet (nodes, slices,
// classes). Stop ends it. Filter runs on one goroutine whatever cfg's
// parallelism: with parallel Filter the feasible nodes come in the order
// the workers finish and ties between equal scores go by that order, so
// a run would not repeat.
func New(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, client *Client) (*Scheduler, error) {
	s := &Scheduler{Client: client, pending: map[string]chan Outcome{}, done: make(chan struct{})}
	client.PrependReactor("create", "pods", s.bind)

	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	factory := scheduler.NewInformerFactory(client, 0, nil)
	s.ledgers = &ledgers{checkEvery: ledgerCheckEvery, claims: factory.Resource().V1().ResourceClaims().Informer()}
	noEvents := func(string) events.EventRecorderLogger { return &events.FakeRecorder{} }
	sched, err := scheduler.New(ctx, client, factory, nil, profile.RecorderFactory(noEvents),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithFrameworkOutOfTreeRegistry(s.ledgers.wrap(registry.Registry())),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithParallelism(1),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	sched.FailureHandler = s.rejected
	s.sched, s.factory = sched, factory
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("scheduler informer for %v did not sync", typ)
		}
	}
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("scheduler event handlers: %w", err)
	}
	go func() { defer close(s.done); sched.Run(ctx) }()
	return s, nil
}

// Stop ends the scheduler and waits for it.
func (s *Scheduler) Stop() {
	s.cancel()
	<-s.done
}

// Schedule creates the pod's claims, then the pod, and waits for the
// scheduler's one decision. A rejected pod and its claims are deleted.
func (s *Scheduler) Schedule(ctx context.Context, pod *v1.Pod, claims []*resourceapi.ResourceClaim) (Outcome, error) {
	for _, c := range claims {
		if _, err := s.Client.ResourceV1().ResourceClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return Outcome{}, fmt.Errorf("create claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	// PreEnqueue refuses a pod whose claims the scheduler has not seen
	// yet, and a refused pod would wait for a later event.
	if err := s.waitForClaims(ctx, claims); err != nil {
		return Outcome{}, err
	}
	key := pod.Namespace + "/" + pod.Name
	ch := make(chan Outcome, 1)
	s.mu.Lock()
	s.pending[key] = ch
	s.mu.Unlock()
	if _, err := s.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return Outcome{}, fmt.Errorf("create pod %s: %w", key, err)
	}
	var out Outcome
	select {
	case out = <-ch:
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	case <-time.After(decisionTimeout):
		pending, summary := s.sched.SchedulingQueue.PendingPods()
		return Outcome{}, fmt.Errorf("pod %s: no scheduling decision within a minute (%d pods in the queue: %s)", key, len(pending), summary)
	}
	if err := s.ledgers.err(); err != nil {
		return Outcome{}, fmt.Errorf("pod %s: %w", key, err)
	}
	if out.Node == "" {
		if err := s.remove(ctx, pod, claims); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *Scheduler) waitForClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) error {
	if len(claims) == 0 {
		return nil
	}
	lister := s.factory.Resource().V1().ResourceClaims().Lister()
	return wait.PollUntilContextTimeout(ctx, 100*time.Microsecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, c := range claims {
			if _, err := lister.ResourceClaims(c.Namespace).Get(c.Name); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// Release deletes a bound pod and its claims, as the pod's end and the
// resourceclaim controller would, and waits until profile's DRA state no
// longer counts them, so that the next pod sees their devices free.
func (s *Scheduler) Release(ctx context.Context, profile string, pod *v1.Pod, claims []*resourceapi.ResourceClaim) error {
	if err := s.remove(ctx, pod, claims); err != nil {
		return err
	}
	return s.sync(ctx, profile)
}

// The barrier claim's made-up device: nothing publishes its driver.
const (
	barrierNamespace = "sim-barrier"
	barrierDriver    = "barrier.sim.gputopo.io"
)

// sync waits until profile's DRA state has taken in every claim write
// made so far. The claim informer and the assume cache hand events on in
// order, so once a new barrier claim's made-up device shows among the
// allocated devices, every earlier deletion has been counted too; the
// same holds for the replay's ledgers (ledger.go), which hear the claim
// informer on their own handlers and are waited for too. A barrier's
// device is in no slice, so it takes nothing away; each barrier is new
// (allocations are immutable) and deletes the one before it, first, so
// that the deletion is counted before the replay goes on.
func (s *Scheduler) sync(ctx context.Context, profile string) error {
	fw, ok := s.sched.Profiles[profile]
	if !ok {
		return fmt.Errorf("scheduler has no profile %q", profile)
	}
	s.barriers++
	name := func(n int) string { return fmt.Sprintf("barrier-%d", n) }
	barrier := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: barrierNamespace, Name: name(s.barriers)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: barrierDriver, Pool: barrierDriver, Device: name(s.barriers)}}}}},
	}
	claims := s.Client.ResourceV1().ResourceClaims(barrierNamespace)
	if s.barriers > 1 {
		if err := claims.Delete(ctx, name(s.barriers-1), metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("barrier claim: %w", err)
		}
	}
	if _, err := claims.Create(ctx, barrier, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("barrier claim: %w", err)
	}
	want := structured.MakeDeviceID(barrierDriver, barrierDriver, name(s.barriers))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Microsecond, decisionTimeout, true, func(context.Context) (bool, error) {
		seen, err := fw.SharedDRAManager().ResourceClaims().ListAllAllocatedDevices()
		return err == nil && seen.Has(want), nil
	})
	if err != nil {
		return fmt.Errorf("scheduler did not see barrier claim %s: %w", barrier.Name, err)
	}
	if err := s.ledgers.counting(ctx, want); err != nil {
		return err
	}
	return nil
}

func (s *Scheduler) remove(ctx context.Context, pod *v1.Pod, claims []*resourceapi.ResourceClaim) error {
	if err := s.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete rejected pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, c := range claims {
		if err := s.Client.ResourceV1().ResourceClaims(c.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete claim %s/%s of rejected pod: %w", c.Namespace, c.Name, err)
		}
	}
	return nil
}

// bind is the API server's pods/binding: it sets the pod's node, then
// reports the decision.
func (s *Scheduler) bind(action clienttesting.Action) (bool, runtime.Object, error) {
	create, ok := action.(clienttesting.CreateAction)
	if !ok || action.GetSubresource() != "binding" {
		return false, nil, nil
	}
	b, ok := create.GetObject().(*v1.Binding)
	if !ok {
		return true, nil, fmt.Errorf("pods/binding: got %T", create.GetObject())
	}
	pods := v1.SchemeGroupVersion.WithResource("pods")
	obj, err := s.Client.store.Get(pods, b.Namespace, b.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*v1.Pod).DeepCopy()
	pod.Spec.NodeName = b.Target.Name
	if err := s.Client.store.Update(pods, pod, b.Namespace); err != nil {
		return true, nil, err
	}
	s.report(b.Namespace+"/"+b.Name, Outcome{Node: b.Target.Name})
	return true, b, nil
}

// rejected replaces the scheduler's failure handler: the pod is not put
// back into the queue (it is tried once), its decision is reported.
func (s *Scheduler) rejected(_ context.Context, _ framework.Framework, podInfo *framework.QueuedPodInfo, status *fwk.Status, _ *fwk.NominatingInfo, _ time.Time) {
	pod := podInfo.Pod
	s.sched.SchedulingQueue.Done(pod.UID)
	reason := status.Message()
	if !status.IsRejected() {
		reason = "scheduler error: " + reason
	}
	s.report(pod.Namespace+"/"+pod.Name, Outcome{Reason: reason})
}

func (s *Scheduler) report(key string, out Outcome) {
	s.mu.Lock()
	ch := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if ch != nil {
		ch <- out
	}
}
