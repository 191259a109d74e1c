package replay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// Target is one scheduler with its copy of the fleet.
type Target struct {
	// Name in the report, e.g. "gputopo" or "in-tree (first-fit)".
	Name string
	// Copy is the fleet copy (node label gputopo.io/copy) it schedules on.
	Copy string
	// SchedulerName of its pods.
	SchedulerName string
}

// Targets are the two schedulers of the shipped configuration, each on
// its own copy of the fleet.
var Targets = []Target{
	{Name: "gputopo", Copy: "gputopo", SchedulerName: "gputopo-scheduler"},
	{Name: "in-tree (first-fit)", Copy: "intree", SchedulerName: "default-scheduler"},
}

// Namespace of a target's pods and claims.
func (t Target) Namespace() string { return "demo-" + t.Copy }

// PodRecord is what happened to one pod.
type PodRecord struct {
	Name, Group, Template string
	Seq                   int
	GPUs                  float64
	Node                  string
	Devices               []string // inspect.DeviceKey: driver/pool/device
	Bound, Left           bool
	Reason                string // why it was pending at the end
}

// Point of the arrival curve.
type Point struct{ ArrivedPercent, UnallocatedPercent float64 }

// Outcome is one target's run.
type Outcome struct {
	Target   Target
	Pods     []*PodRecord
	Curve    []Point
	Duration time.Duration
}

// Options of a replay.
type Options struct {
	// CapacityGPUs of each copy of the fleet, for the arrival curve.
	CapacityGPUs float64
	// Progress gets a line after each step.
	Progress func(line string)
	// NodeLabel selects a target's copy of the fleet.
	NodeLabel string
}

// Run plays the workload through every target at once (each pod is
// created for every target before the next), step by step, waiting after
// each step until every pod is bound or found unschedulable.
func Run(ctx context.Context, client kubernetes.Interface, w Workload, targets []Target, o Options) ([]*Outcome, error) {
	start := time.Now()
	r := &replayer{client: client, w: w, targets: targets, o: o,
		outs: make([]*Outcome, len(targets)), records: make([]map[string]*PodRecord, len(targets))}
	for i, t := range targets {
		r.outs[i] = &Outcome{Target: t, Curve: []Point{{0, 100}}}
		r.records[i] = map[string]*PodRecord{}
		if err := setup(ctx, client, w, t); err != nil {
			return nil, err
		}
	}
	for step := 0; step < w.Steps; step++ {
		left, err := r.leave(ctx, step)
		if err != nil {
			return nil, err
		}
		if left {
			time.Sleep(time.Second) // let claims be released and pending pods retried
		}
		if err := r.arrive(ctx, step); err != nil {
			return nil, err
		}
		if err := r.settle(ctx); err != nil {
			return nil, err
		}
		r.progress(step)
	}
	for _, out := range r.outs {
		out.Duration = time.Since(start)
	}
	return r.outs, nil
}

// replayer is one Run's state: the pods created so far per target.
type replayer struct {
	client  kubernetes.Interface
	w       Workload
	targets []Target
	o       Options
	outs    []*Outcome
	records []map[string]*PodRecord
	arrived float64 // GPUs asked for so far
	seq     int     // pods created so far, per target
}

// leave deletes the pods whose group leaves at step, from every target.
func (r *replayer) leave(ctx context.Context, step int) (bool, error) {
	left := false
	for _, g := range r.w.Pods {
		if g.Leave != step || g.Leave == 0 {
			continue
		}
		for i, t := range r.targets {
			for k := range g.Count {
				name := fmt.Sprintf("%s-%d", g.Name, k)
				err := r.client.CoreV1().Pods(t.Namespace()).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, err
				}
				if rec := r.records[i][name]; rec != nil {
					rec.Left = true
				}
				left = true
			}
			if g.Group != nil {
				err := r.client.SchedulingV1beta1().PodGroups(t.Namespace()).Delete(ctx, g.Name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, err
				}
			}
		}
	}
	return left, nil
}

// podGroupFor is the PodGroup of a pods entry with a group: a gang of
// minCount, within one domain of the topology key if one is given.
func podGroupFor(t Target, g PodGroup) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace(), Name: g.Name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(g.Group.MinCount)}}},
	}
	if g.Group.Topology != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: g.Group.Topology}}}
	}
	return pg
}

// arrive creates the pods whose group arrives at step, each in every
// target before the next.
func (r *replayer) arrive(ctx context.Context, step int) error {
	for _, g := range r.w.Pods {
		if g.Arrive != step {
			continue
		}
		tmpl := r.w.Templates[g.Template]
		if g.Group != nil {
			for _, t := range r.targets {
				if _, err := r.client.SchedulingV1beta1().PodGroups(t.Namespace()).Create(ctx, podGroupFor(t, g), metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("create PodGroup %s/%s: %w", t.Namespace(), g.Name, err)
				}
			}
		}
		for k := range g.Count {
			name := fmt.Sprintf("%s-%d", g.Name, k)
			r.arrived += tmpl.GPUs
			for i, t := range r.targets {
				pod := podFor(t, name, g, tmpl, r.seq, r.o.NodeLabel)
				if _, err := r.client.CoreV1().Pods(t.Namespace()).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("create pod %s/%s: %w", t.Namespace(), name, err)
				}
				rec := &PodRecord{Name: name, Group: g.Name, Template: g.Template, Seq: r.seq, GPUs: tmpl.GPUs}
				r.outs[i].Pods = append(r.outs[i].Pods, rec)
				r.records[i][name] = rec
			}
			r.seq++
		}
	}
	return nil
}

// settle waits in every target until each pod is bound or unschedulable,
// records where they went, and adds a point to the arrival curve.
func (r *replayer) settle(ctx context.Context) error {
	for i, t := range r.targets {
		if err := settle(ctx, r.client, t.Namespace()); err != nil {
			return err
		}
		if err := snapshot(ctx, r.client, t.Namespace(), r.records[i]); err != nil {
			return err
		}
		used := 0.0
		for _, rec := range r.outs[i].Pods {
			if rec.Bound && !rec.Left {
				used += rec.GPUs
			}
		}
		if c := r.o.CapacityGPUs; c > 0 {
			r.outs[i].Curve = append(r.outs[i].Curve, Point{100 * r.arrived / c, 100 * (1 - used/c)})
		}
	}
	return nil
}

func (r *replayer) progress(step int) {
	if r.o.Progress == nil {
		return
	}
	line := fmt.Sprintf("step %d/%d", step+1, r.w.Steps)
	for _, out := range r.outs {
		placed, pending := count(out)
		line += fmt.Sprintf("  |  %s: %d placed, %d pending", out.Target.Name, placed, pending)
	}
	r.o.Progress(line)
}

func count(o *Outcome) (placed, pending int) {
	for _, r := range o.Pods {
		switch {
		case r.Left:
		case r.Bound:
			placed++
		default:
			pending++
		}
	}
	return placed, pending
}

func setup(ctx context.Context, client kubernetes.Interface, w Workload, t Target) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.Namespace()}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for name, tmpl := range w.Templates {
		if tmpl.Resource != "" {
			continue // its pods ask for an extended resource
		}
		ct := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace(), Name: name},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: ClaimSpec(tmpl)},
		}
		if _, err := client.ResourceV1().ResourceClaimTemplates(t.Namespace()).Create(ctx, ct, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("claim template %s: %w", name, err)
		}
	}
	return nil
}

func podFor(t Target, name string, g PodGroup, tmpl ClaimTemplate, seq int, nodeLabel string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace(), Name: name,
			Labels: map[string]string{"gputopo.io/group": g.Name, "gputopo.io/seq": strconv.Itoa(seq)}},
		Spec: v1.PodSpec{
			SchedulerName: t.SchedulerName,
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(g.Template)}},
		},
	}
	if tmpl.Resource != "" {
		n := *resource.NewQuantity(tmpl.Count, resource.DecimalSI)
		p.Spec.ResourceClaims = nil
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceName(tmpl.Resource): n}, Requests: v1.ResourceList{v1.ResourceName(tmpl.Resource): n}}
	}
	if nodeLabel != "" {
		p.Spec.NodeSelector = map[string]string{nodeLabel: t.Copy}
	}
	if g.Group != nil {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(g.Name)}
	}
	return p
}

// ClaimSpec is the claim a template stands for: one request, "gpu".
func ClaimSpec(tmpl ClaimTemplate) resourceapi.ResourceClaimSpec {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: tmpl.Class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: max(tmpl.Count, 1)}
	if tmpl.Selector != "" {
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: tmpl.Selector}}}
	}
	if tmpl.Memory != nil || tmpl.Compute != nil {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
		if tmpl.Memory != nil {
			req.Capacity.Requests[contract.CapacityMemory] = *tmpl.Memory
		}
		if tmpl.Compute != nil {
			req.Capacity.Requests[contract.CapacityCompute] = *tmpl.Compute
		}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}}
}
