package replay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/openb"
)

// OpenBOutcome is one target's replay of an openb trace.
type OpenBOutcome struct {
	Outcome
	Tracker *openb.Tracker
}

// RunOpenB replays the trace's pods in order through every target, each
// on its copy of the openb fleet, never deleting any (the published
// methodology). At most window pods per target wait for the scheduler at
// a time, so arrival order is kept up to that window.
func RunOpenB(ctx context.Context, client kubernetes.Interface, pods []openb.Pod, capacityMilli int64, targets []Target, nodeLabel, modelLabel string, window int, progress func(string)) ([]*OpenBOutcome, error) {
	start := time.Now()
	outs := make([]*OpenBOutcome, len(targets))
	for i, t := range targets {
		outs[i] = &OpenBOutcome{Outcome: Outcome{Target: t}, Tracker: openb.NewTracker(capacityMilli)}
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.Namespace()}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	templates := map[string]bool{}
	var arrivedMilli int64 // GPU the pods created so far ask for
	for k, p := range pods {
		arrivedMilli += p.GPUMilliRequest()
		tmpl, count, percent := OpenBTemplateName(p)
		if tmpl != "" && !templates[tmpl] {
			for _, t := range targets {
				if err := openbTemplate(ctx, client, t.Namespace(), tmpl, count, percent); err != nil {
					return nil, err
				}
			}
			templates[tmpl] = true
		}
		for i, t := range targets {
			pod := OpenBPod(t, k, p, tmpl, nodeLabel, modelLabel)
			if _, err := client.CoreV1().Pods(t.Namespace()).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("create %s: %w", pod.Name, err)
			}
			outs[i].Pods = append(outs[i].Pods, &PodRecord{Name: pod.Name, Seq: k, GPUs: float64(p.GPUMilliRequest()) / 1000})
		}
		if (k+1)%window == 0 {
			for _, t := range targets {
				if err := waitBelow(ctx, client, t.Namespace(), window); err != nil {
					return nil, err
				}
			}
			if progress != nil {
				progress(fmt.Sprintf("%d/%d pods arrived (%.0f%% of GPU capacity), %s", k+1, len(pods),
					100*float64(arrivedMilli)/float64(capacityMilli), time.Since(start).Round(time.Second)))
			}
		}
	}
	// The targets ran side by side: one clock for all, stopped once each
	// has settled and before the snapshots, which are not scheduling.
	for _, t := range targets {
		if err := settle(ctx, client, t.Namespace()); err != nil {
			return nil, err
		}
	}
	took := time.Since(start)
	for i, t := range targets {
		records := map[string]*PodRecord{}
		for _, r := range outs[i].Pods {
			records[r.Name] = r
		}
		if err := snapshot(ctx, client, t.Namespace(), records); err != nil {
			return nil, err
		}
		for k, r := range outs[i].Pods {
			outs[i].Tracker.Arrive(pods[k])
			if r.Bound {
				outs[i].Tracker.Placed(pods[k], pods[k].GPUMilliRequest())
			} else {
				outs[i].Tracker.Rejected(pods[k])
			}
		}
		outs[i].Duration = took
	}
	return outs, nil
}

// waitBelow waits until fewer than n pods of the namespace await the
// scheduler's first decision. It lists only unbound pods, from the watch
// cache: listing all of a growing trace every few milliseconds would
// become the API server's main work.
func waitBelow(ctx context.Context, client kubernetes.Interface, ns string, n int) error {
	for {
		var list *v1.PodList
		err := retryRead(func() (err error) {
			list, err = client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: "spec.nodeName="})
			return err
		})
		if err != nil {
			return err
		}
		waiting := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == "" && !unschedulable(&p) {
				waiting++
			}
		}
		if waiting < n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func openbTemplate(ctx context.Context, client kubernetes.Interface, ns, name string, count, percent int64) error {
	ct := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: OpenBClaimSpec(count, percent)},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, ct, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("claim template %s: %w", name, err)
	}
	return nil
}

// OpenBTemplateName names the claim template of a pod's GPU request
// ("" for a pod without GPUs) and returns its spec's count and percent.
func OpenBTemplateName(p openb.Pod) (name string, count, percent int64) {
	if p.NumGPU == 0 {
		return "", 0, 0
	}
	percent = p.GPUMilliRequest() / int64(p.NumGPU) / 10
	return fmt.Sprintf("openb-%dx%d", p.NumGPU, percent), int64(p.NumGPU), percent
}

// OpenBClaimSpec asks for count shared GPUs with percent of each one's
// compute (100: the whole GPU).
func OpenBClaimSpec(count, percent int64) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: contract.ClassSharedGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
			Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
				contract.CapacityCompute: *resource.NewQuantity(percent, resource.DecimalSI)}},
		}}}}}
}

// OpenBPod is the k-th pod of the replay for target t: its CPU and memory,
// its GPU request through claim template tmpl ("" for none), the GPU
// models it accepts as node affinity on modelLabel.
func OpenBPod(t Target, k int, p openb.Pod, tmpl, nodeLabel, modelLabel string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace(), Name: fmt.Sprintf("p%05d", k), Labels: map[string]string{"gputopo.io/seq": strconv.Itoa(k)}},
		Spec: v1.PodSpec{
			SchedulerName: t.SchedulerName,
			NodeSelector:  map[string]string{nodeLabel: t.Copy},
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    *resource.NewMilliQuantity(p.CPUMilli, resource.DecimalSI),
					v1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB*1024*1024, resource.BinarySI)}}}},
		},
	}
	if tmpl != "" {
		pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl)}}
	}
	if len(p.GPUSpec) > 0 {
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: modelLabel, Operator: v1.NodeSelectorOpIn, Values: p.GPUSpec}}}}}}}
	}
	return pod
}
