package sim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/demo/replay"
)

// podClaimAnnotation is what the resourceclaim controller writes on the
// claims it creates from a pod's template: the pod's claim entry.
const podClaimAnnotation = "resource.kubernetes.io/pod-claim-name"

// RunOpenB replays pods in order through target's profile on its own
// copy of nodes (the same objects the API-server replay creates), each
// pod decided before the next arrives, none deleted unless rejected.
// Filter runs on one goroutine, so a replay repeats exactly: the same
// seed gives the same placements (run several replays at once for speed).
func RunOpenB(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, t replay.Target, nodes []openb.Node, pods []openb.Pod) (*replay.OpenBOutcome, error) {
	return runOpenB(ctx, cfg, t, nodes, pods, nil)
}

// runOpenB is RunOpenB, handing the in-memory API to inspect (tests).
func runOpenB(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, t replay.Target, nodes []openb.Node, pods []openb.Pod, inspect func(*Client)) (*replay.OpenBOutcome, error) {
	start := time.Now()
	client := NewClient()
	if inspect != nil {
		inspect(client)
	}
	if err := fleet.CreateDeviceClasses(ctx, client); err != nil {
		return nil, err
	}
	if _, err := fleet.StartOpenB(ctx, client, nodes, []string{t.Copy}); err != nil {
		return nil, err
	}
	s, err := New(ctx, cfg, client)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	out := &replay.OpenBOutcome{Outcome: replay.Outcome{Target: t}, Tracker: openb.NewTracker(openb.CapacityMilli(nodes))}
	for k, p := range pods {
		pod, claims := openbObjects(t, k, p)
		out.Tracker.Arrive(p)
		decision, err := s.Schedule(ctx, pod, claims)
		if err != nil {
			return nil, err
		}
		rec := &replay.PodRecord{Name: pod.Name, Seq: k, GPUs: float64(p.GPUMilliRequest()) / 1000,
			Node: decision.Node, Bound: decision.Node != "", Reason: decision.Reason}
		out.Pods = append(out.Pods, rec)
		if rec.Bound {
			out.Tracker.Placed(p, p.GPUMilliRequest())
		} else {
			out.Tracker.Rejected(p)
		}
	}
	out.Duration = time.Since(start)
	return out, nil
}

// openbObjects is the k-th pod as the API-server replay creates it, with
// the claim the resourceclaim controller would make from its template
// (owned by the pod, recorded in the pod's status).
func openbObjects(t replay.Target, k int, p openb.Pod) (*v1.Pod, []*resourceapi.ResourceClaim) {
	tmpl, count, percent := replay.OpenBTemplateName(p)
	pod := replay.OpenBPod(t, k, p, tmpl, fleet.CopyLabel, fleet.ModelLabel)
	pod.UID = types.UID(fmt.Sprintf("%s-%d", t.Copy, k))
	if tmpl == "" {
		return pod, nil
	}
	claim := podClaim(pod, pod.Spec.ResourceClaims[0].Name, replay.OpenBClaimSpec(count, percent))
	return pod, []*resourceapi.ResourceClaim{claim}
}
