package inspect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	cgotesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// whyPod is a pending pod of namespace ml with a claim from a template
// and, with group, in a pod group.
func whyPod(group string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0"}, Spec: v1.PodSpec{
		SchedulerName:  "gputopo-scheduler",
		ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpu-pair")}},
	}}
	if group != "" {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	return p
}

// A claim a template should have made but that does not exist (a typo
// in the template's name: no entry in the pod's status) is said, with
// where to look; one created is read.
func TestWhyClaimNotCreated(t *testing.T) {
	created := whyPod("")
	created.Spec.ResourceClaims = append(created.Spec.ResourceClaims,
		v1.PodResourceClaim{Name: "made", ResourceClaimTemplateName: ptr.To("one")},
		v1.PodResourceClaim{Name: "unneeded", ResourceClaimTemplateName: ptr.To("none")})
	created.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "made", ResourceClaimName: ptr.To("train-0-made-x")}, {Name: "unneeded"}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0-made-x"}}
	var b strings.Builder
	if err := Why(context.Background(), fake.NewClientset(created, claim), "ml", "train-0", &b); err != nil {
		t.Fatal(err)
	}
	want := "claim gpus (from template gpu-pair): not created yet\n" +
		"  the resourceclaim controller makes it from the template: does ResourceClaimTemplate gpu-pair exist in namespace ml? (kubectl describe pod train-0 -n ml shows its FailedResourceClaimCreation events)\n" +
		"claim train-0-made-x:\n  not allocated\n"
	if got := b.String(); !strings.HasSuffix(got, want) {
		t.Errorf("written\n%s\nwant it to end with\n%s", got, want)
	}
}

// What why cannot read (a claim or PodGroup it may not get, an API the
// server does not serve) is an error, not a line of its output; a
// PodGroup that does not exist is a state of the pod, said.
func TestWhyReadErrors(t *testing.T) {
	forbidden := func(resource string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "x", errors.New("no"))
	}
	// The API server's 404 for a resource it does not serve names no object.
	notServed := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}
	for _, tc := range []struct {
		name              string
		pod               *v1.Pod
		resource          string
		err               error
		wantErr, wantLine string
	}{
		{"claim forbidden", created(whyPod("")), "resourceclaims", forbidden("resourceclaims"), "claim train-0-gpus-x: resourceclaims \"x\" is forbidden", "pod ml/train-0 is pending"},
		{"pod group forbidden", whyPod("g"), "podgroups", forbidden("podgroups"), "pod group g: podgroups \"x\" is forbidden", "claim gpus (from template gpu-pair)"},
		{"PodGroups not served", whyPod("g"), "podgroups", notServed, "pod group g: the API server does not serve scheduling.k8s.io/v1beta1 PodGroups", "claim gpus (from template gpu-pair)"},
		{"pod group missing", whyPod("g"), "", nil, "", "pod group g: not found (the scheduler waits for the PodGroup to exist)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.pod)
			if tc.err != nil {
				client.PrependReactor("get", tc.resource, func(cgotesting.Action) (bool, apiruntime.Object, error) { return true, nil, tc.err })
			}
			var b strings.Builder
			err := Why(context.Background(), client, "ml", "train-0", &b)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(b.String(), tc.wantLine) || strings.Contains(b.String(), "forbidden") || strings.Contains(b.String(), "could not find") {
				t.Errorf("written\n%s\nwant %q, no error", b.String(), tc.wantLine)
			}
		})
	}
}

// created gives the pod's template claim its claim's name, as the
// resourceclaim controller does.
func created(p *v1.Pod) *v1.Pod {
	p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("train-0-gpus-x")}}
	return p
}

// A PodGroup that exists is read with the namespace's pods.
func TestWhyPodGroup(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "g"}}
	pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}
	var b strings.Builder
	if err := Why(context.Background(), fake.NewClientset(whyPod("g"), pg), "ml", "train-0", &b); err != nil {
		t.Fatal(err)
	}
	if want := "pod group g: 1 pods, 0 bound\n  gang: at least 2 pods start together\n  waiting for 1 more pod(s)"; !strings.Contains(b.String(), want) {
		t.Errorf("written\n%s\nwant %q", b.String(), want)
	}
}

// why counts a group's pods from a list in pages that leaves out the
// pods that ended: a member that succeeded or failed is not one the gang
// waits for.
func TestWhyPodGroupListsUnfinishedPodsInPages(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "g"}}
	pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1200}
	var pods []v1.Pod
	for i := range 1201 {
		p := whyPod("g")
		p.Name = fmt.Sprintf("train-%d", i)
		if i%2 == 1 {
			p.Status.Phase = v1.PodSucceeded
		}
		pods = append(pods, *p)
	}
	client := fake.NewClientset(whyPod("g"), pg)
	var seen listed
	phase := func(p v1.Pod) fields.Set { return fields.Set{"status.phase": string(p.Status.Phase)} }
	servePages(client, &seen, "pods", pods, phase, func(items []v1.Pod, next string) apiruntime.Object {
		return &v1.PodList{ListMeta: metav1.ListMeta{Continue: next}, Items: items}
	})
	var b strings.Builder
	if err := Why(context.Background(), client, "ml", "train-0", &b); err != nil {
		t.Fatal(err)
	}
	if want := "pod group g: 601 pods, 0 bound\n  gang: at least 1200 pods start together\n  waiting for 599 more pod(s)"; !strings.Contains(b.String(), want) {
		t.Errorf("written\n%s\nwant %q", b.String(), want)
	}
	if n := len(seen.opts["pods"]); n != 2 {
		t.Errorf("pods listed in %d requests, want 2 pages of 500 (601 pods)", n)
	}
}

// A claim the pod names that does not exist is said, with why, and is
// no error: a Job's pod that ended has its claims deleted by the
// resourceclaim controller (its status still names them), a pending
// pod's extended-resource claim of an earlier attempt is replaced when
// it is placed, and a claim of the user's the pod waits for.
func TestWhyMissingClaims(t *testing.T) {
	extended := func(phase v1.PodPhase, node string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0"}, Spec: v1.PodSpec{SchedulerName: "gputopo-scheduler", NodeName: node}}
		p.Status.Phase = phase
		p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "train-0-extended-resources-x"}
		return p
	}
	named := func(phase v1.PodPhase) *v1.Pod {
		p := whyPod("")
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("shared-gpus")}}
		p.Spec.NodeName = "n1"
		p.Status.Phase = phase
		return p
	}
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		wantLines []string
	}{
		{"a Job's pod that ended", extended(v1.PodSucceeded, "n1"), []string{
			"pod ml/train-0 has ended (Succeeded) on node n1 (scheduler gputopo-scheduler)",
			"claim train-0-extended-resources-x: deleted (the pod has ended, and the resourceclaim controller deletes the claims made for it)"}},
		{"a pod that failed before it was scheduled", extended(v1.PodFailed, ""), []string{
			"pod ml/train-0 has ended (Failed) before it was scheduled (scheduler gputopo-scheduler)",
			"claim train-0-extended-resources-x: deleted (the pod has ended"}},
		{"a pending pod's claim of an earlier attempt", extended(v1.PodPending, ""), []string{
			"pod ml/train-0 is pending",
			"claim train-0-extended-resources-x: not found: the claim of an earlier attempt, which the scheduler replaces when it places the pod"}},
		{"a claim of the user's, pod running", named(v1.PodRunning), []string{
			"pod ml/train-0 is bound to node n1",
			"claim shared-gpus: does not exist in namespace ml (the pod cannot run without it)"}},
		{"a claim of the user's, pod ended: not the controller's to delete", named(v1.PodFailed), []string{
			"pod ml/train-0 has ended (Failed) on node n1",
			"claim shared-gpus: does not exist in namespace ml\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := Why(context.Background(), fake.NewClientset(tc.pod), "ml", "train-0", &b); err != nil {
				t.Errorf("error %v, want the missing claim said", err)
			}
			for _, want := range tc.wantLines {
				if !strings.Contains(b.String(), want) {
					t.Errorf("written\n%s\nwant the line %q", b.String(), want)
				}
			}
		})
	}
}

// A bound pod whose containers have not started (the node agent refused
// to prepare its devices, say) says so and where the reason is; a running
// one does not.
func TestWhyBoundPodNotStarted(t *testing.T) {
	pod := func(phase v1.PodPhase, waiting string) *v1.Pod {
		p := whyPod("")
		p.Spec.NodeName = "n1"
		p.Spec.ResourceClaims = nil
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		if waiting != "" {
			p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waiting}}
		}
		return p
	}
	const line = "  containers not started: main (ContainerCreating); the kubelet's events say why (kubectl describe pod train-0 -n ml: FailedPrepareDynamicResources when the node agent refused the devices)\n"
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"waiting for its devices", pod(v1.PodPending, "ContainerCreating"), true},
		{"running", pod(v1.PodRunning, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := Why(context.Background(), fake.NewClientset(tc.pod), "ml", "train-0", &b); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), line); got != tc.want {
				t.Errorf("written\n%s\nthe line %q there: %v, want %v", b.String(), line, got, tc.want)
			}
		})
	}
}
