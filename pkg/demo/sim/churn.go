package sim

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/replay"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// churnNamespace holds a churn run's pods and claims.
const churnNamespace = "churn"

// ChurnRun is what one target did with one seed of a stream.
type ChurnRun struct {
	Stream       string
	Target       replay.Target
	Seed         uint64
	Jobs, Served int
	// ServedBeforeRejection counts the jobs served before the first
	// rejected one (all of them when none was).
	ServedBeforeRejection int
	// RejectedWithRoom counts the jobs turned away while the fleet had
	// at least as many GPUs free as they ask for (a MIG profile or a
	// share counts its fraction of a GPU): turned away by how the free
	// capacity was spread, not by how much there was; the rest no
	// placement could have avoided at that moment. An upper bound on
	// what placement could have saved: free GPUs of different nodes (or
	// fractions of different GPUs) cannot be pooled without moving jobs.
	RejectedWithRoom int
	// MultiGPU counts the served claims of two or more whole GPUs for
	// which, when they arrived, some node had that many free GPUs at the
	// best link class it offers so many; AtBestLink of them got it.
	MultiGPU, AtBestLink int
	// AllocatedPercent is the time-averaged share of the fleet's GPUs
	// held, from the first arrival to the last.
	AllocatedPercent float64
	Kinds            []KindCount
	Duration         time.Duration
}

// BestLinkPercent is AtBestLink over MultiGPU, 100 when there were none.
func (r ChurnRun) BestLinkPercent() float64 {
	if r.MultiGPU == 0 {
		return 100
	}
	return 100 * float64(r.AtBestLink) / float64(r.MultiGPU)
}

// KindCount is how many jobs of a kind arrived and were served.
type KindCount struct {
	Kind            string
	Arrived, Served int
}

// running is a served job until it leaves.
type running struct {
	job
	pod     *v1.Pod
	claims  []*resourceapi.ResourceClaim
	devices []string
	gpus    float64
}

// departing is a job until it leaves: a served job of a churn run, or
// of the counting model.
type departing interface{ leaveTime() float64 }

func (j job) leaveTime() float64 { return j.leave }

// departures orders jobs by when they leave (a heap).
type departures[T departing] []T

func (d departures[T]) Len() int           { return len(d) }
func (d departures[T]) Less(i, j int) bool { return d[i].leaveTime() < d[j].leaveTime() }
func (d departures[T]) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *departures[T]) Push(x any)        { *d = append(*d, x.(T)) }
func (d *departures[T]) Pop() any {
	old := *d
	r := old[len(old)-1]
	*d = old[:len(old)-1]
	return r
}

// RunChurn plays seed's jobs of st through target t on a fresh fleet:
// each job is tried once when it arrives (a rejected one is gone), a
// served one leaves at its time, its pod and claim deleted and its
// devices free for the jobs after.
func RunChurn(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, st Stream, seed uint64, t replay.Target) (ChurnRun, error) {
	start := time.Now()
	client := NewClient()
	if err := fleet.CreateDeviceClasses(ctx, client); err != nil {
		return ChurnRun{}, err
	}
	l, capacity, err := publishStream(ctx, client, st)
	if err != nil {
		return ChurnRun{}, err
	}
	s, err := New(ctx, cfg, client)
	if err != nil {
		return ChurnRun{}, err
	}
	defer s.Stop()
	c := &churn{s: s, st: st, t: t, links: l, capacity: capacity, run: ChurnRun{Stream: st.Name, Target: t, Seed: seed}}
	for _, k := range st.Kinds {
		c.run.Kinds = append(c.run.Kinds, KindCount{Kind: k.Name})
	}
	jobs := st.jobs(seed, capacity)
	for _, j := range jobs {
		if err := c.arrive(ctx, j); err != nil {
			return ChurnRun{}, fmt.Errorf("stream %s, seed %d, %s, job %d: %w", st.Name, seed, t.Name, j.seq, err)
		}
	}
	if n := len(jobs); n > 0 {
		c.advance(jobs[n-1].arrive)
		c.run.AllocatedPercent = 100 * c.area / (capacity * jobs[n-1].arrive)
	}
	c.run.Jobs = len(jobs)
	c.run.Duration = time.Since(start)
	return c.run, nil
}

// churn is one run in progress.
type churn struct {
	s        *Scheduler
	st       Stream
	t        replay.Target
	links    *links
	capacity float64 // the fleet's GPUs
	run      ChurnRun

	held       departures[*running]
	rejected   bool
	allocated  float64 // GPUs held now
	area, last float64 // GPU-time held so far, up to last
}

func (c *churn) advance(now float64) {
	c.area += c.allocated * (now - c.last)
	c.last = now
}

// arrive lets every job due to leave go, then tries j.
func (c *churn) arrive(ctx context.Context, j job) error {
	for c.held.Len() > 0 && c.held[0].leave <= j.arrive {
		r := heap.Pop(&c.held).(*running)
		c.advance(r.leave)
		if err := c.s.Release(ctx, c.t.SchedulerName, r.pod, r.claims); err != nil {
			return err
		}
		c.allocated -= r.gpus
		c.links.take(r.devices, false)
	}
	c.advance(j.arrive)
	kind := c.st.Kinds[j.kind]
	multi := kind.Template.Class == contract.ClassGPU && kind.Template.Count >= 2
	feasible := multi && c.links.feasible(int(kind.Template.Count))
	pod, claims := churnObjects(c.t, j, kind)
	out, err := c.s.Schedule(ctx, pod, claims)
	if err != nil {
		return err
	}
	c.run.Kinds[j.kind].Arrived++
	if out.Node == "" {
		c.rejected = true
		if c.capacity-c.allocated >= kind.Template.GPUs-1e-9 {
			c.run.RejectedWithRoom++
		}
		return nil
	}
	c.run.Served++
	c.run.Kinds[j.kind].Served++
	if !c.rejected {
		c.run.ServedBeforeRejection++
	}
	devices, err := c.allocatedDevices(ctx, claims)
	if err != nil {
		return err
	}
	if feasible {
		c.run.MultiGPU++
		if c.links.atBest(out.Node, devices) {
			c.run.AtBestLink++
		}
	}
	c.links.take(devices, true)
	c.allocated += kind.Template.GPUs
	heap.Push(&c.held, &running{job: j, pod: pod, claims: claims, devices: devices, gpus: kind.Template.GPUs})
	return nil
}

// allocatedDevices reads the claims' allocations (pool/device) back.
func (c *churn) allocatedDevices(ctx context.Context, claims []*resourceapi.ResourceClaim) ([]string, error) {
	var out []string
	for _, cl := range claims {
		got, err := c.s.Client.ResourceV1().ResourceClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if got.Status.Allocation == nil {
			return nil, fmt.Errorf("claim %s/%s of a bound pod has no allocation", cl.Namespace, cl.Name)
		}
		for _, r := range got.Status.Allocation.Devices.Results {
			out = append(out, r.Pool+"/"+r.Device)
		}
	}
	return out, nil
}

// publishStream creates the stream's fleet; it returns its whole GPUs'
// links and its capacity in GPUs.
func publishStream(ctx context.Context, client *Client, st Stream) (*links, float64, error) {
	l := newLinks()
	capacity := 0.0
	for _, g := range st.Fleet {
		for i := range g.Count {
			name := fmt.Sprintf("%s-%d", g.Name, i)
			n, err := fleet.PublishMock(ctx, client, name, map[string]string{fleet.ShapeLabel: string(g.Shape)}, g, g.Rack)
			if err != nil {
				return nil, 0, err
			}
			capacity += float64(n.GPUs)
			if g.Mode == config.Whole || g.Mode == "" {
				l.add(name, n.Slices)
			}
		}
	}
	return l, capacity, nil
}

// churnObjects is job j's pod with its claim as the resourceclaim
// controller would have made it from a template.
func churnObjects(t replay.Target, j job, k JobKind) (*v1.Pod, []*resourceapi.ResourceClaim) {
	name := fmt.Sprintf("%s-%d", k.Name, j.seq)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: churnNamespace, Name: name, UID: types.UID("pod-" + name)},
		Spec: v1.PodSpec{
			SchedulerName: t.SchedulerName,
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(k.Name)}},
		},
	}
	return pod, []*resourceapi.ResourceClaim{podClaim(pod, "gpu", replay.ClaimSpec(k.Template))}
}

// podClaim is the claim the resourceclaim controller makes for the pod's
// claim entry from its template: owned by the pod, recorded in its status.
func podClaim(pod *v1.Pod, entry string, spec resourceapi.ResourceClaimSpec) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   pod.Namespace,
			Name:        pod.Name + "-" + entry,
			UID:         types.UID(string(pod.UID) + "-" + entry),
			Annotations: map[string]string{podClaimAnnotation: entry},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: spec,
	}
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: entry, ResourceClaimName: ptr.To(claim.Name)})
	return claim
}
