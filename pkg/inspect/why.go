package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Why explains where a pod stands: bound (where, with which devices) or
// pending, with the scheduler's reasons one per line (gputopo's say per
// request how many devices match and why they are not free), and what
// each of its claims asks for. It reads the pod and its claims (get).
// A claim that does not exist is said, with why (a pod that ended has
// its generated claims deleted). What it cannot read (a claim or
// PodGroup it may not get) it leaves out of w and returns as the error,
// after writing the rest.
func Why(ctx context.Context, client kubernetes.Interface, namespace, name string, w io.Writer) error {
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	var b strings.Builder
	var errs []error
	writeStanding(&b, pod)
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		errs = append(errs, writeGroup(ctx, client, &b, pod, *g.PodGroupName))
	}
	errs = append(errs, writeClaims(ctx, client, &b, pod)...)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// writeClaims writes each of the pod's claims, and returns the errors
// of those it could not get.
func writeClaims(ctx context.Context, client kubernetes.Interface, b *strings.Builder, pod *v1.Pod) []error {
	var errs []error
	for _, c := range podClaims(pod) {
		if c.claim == "" {
			fmt.Fprintf(b, "claim %s (from template %s): not created yet\n", c.entry, c.template)
			fmt.Fprintf(b, "  the resourceclaim controller makes it from the template: does ResourceClaimTemplate %s exist in namespace %s? (kubectl describe pod %s -n %s shows its FailedResourceClaimCreation events)\n", c.template, pod.Namespace, pod.Name, pod.Namespace)
			continue
		}
		claim, err := client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, c.claim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && !notServed(err):
			fmt.Fprintf(b, "claim %s: %s\n", c.claim, whyMissing(pod, c))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("claim %s: %w", c.claim, err))
			continue
		}
		writeClaim(b, claim, time.Now())
	}
	return errs
}

// writeStanding says whether the pod is bound, pending or has ended, and
// where; for a pod never bound, the scheduler's reasons.
func writeStanding(b *strings.Builder, pod *v1.Pod) {
	name := pod.Namespace + "/" + pod.Name
	switch {
	case ended(pod) && pod.Spec.NodeName != "":
		fmt.Fprintf(b, "pod %s has ended (%s) on node %s (scheduler %s)\n", name, pod.Status.Phase, pod.Spec.NodeName, pod.Spec.SchedulerName)
		return
	case ended(pod):
		fmt.Fprintf(b, "pod %s has ended (%s) before it was scheduled (scheduler %s)\n", name, pod.Status.Phase, pod.Spec.SchedulerName)
	case pod.Spec.NodeName != "":
		fmt.Fprintf(b, "pod %s is bound to node %s (scheduler %s)\n", name, pod.Spec.NodeName, pod.Spec.SchedulerName)
		writeWaiting(b, pod)
		return
	default:
		fmt.Fprintf(b, "pod %s is pending (scheduler %s)\n", name, pod.Spec.SchedulerName)
	}
	writeReasons(b, pod)
}

// writeWaiting says which containers of a bound pod that is still
// pending have not started, and why they wait: a node agent that refuses
// to prepare the devices leaves them in ContainerCreating, and only the
// kubelet's events say why.
func writeWaiting(b *strings.Builder, pod *v1.Pod) {
	if pod.Status.Phase != v1.PodPending {
		return
	}
	var waiting []string
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range statuses {
			if w := c.State.Waiting; w != nil {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", c.Name, w.Reason))
			}
		}
	}
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintf(b, "  containers not started: %s; the kubelet's events say why (kubectl describe pod %s -n %s: FailedPrepareDynamicResources when the node agent refused the devices)\n",
		strings.Join(waiting, ", "), pod.Name, pod.Namespace)
}

// whyMissing says why a claim the pod names does not exist: a pod that
// ended has its generated claims deleted by the resourceclaim
// controller; a pending pod's extended-resource claim of an earlier
// attempt is replaced when the scheduler places it; any other claim the
// pod waits for.
func whyMissing(pod *v1.Pod, c podClaim) string {
	switch {
	case ended(pod) && !c.named:
		return "deleted (the pod has ended, and the resourceclaim controller deletes the claims made for it)"
	case c.extended && pod.Spec.NodeName == "":
		return "not found: the claim of an earlier attempt, which the scheduler replaces when it places the pod"
	case ended(pod):
		return "does not exist in namespace " + pod.Namespace
	default:
		return fmt.Sprintf("does not exist in namespace %s (the pod cannot run without it)", pod.Namespace)
	}
}

// ended: the pod's containers have all stopped for good.
func ended(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// writeReasons writes the PodScheduled condition's message one reason a
// line: under "0/4 nodes are available:" its per-node reasons, a pod
// group's "0/2 placements are available, first placement status:" above
// what its first placement said, any other message whole (a plugin's for
// the whole pod group, a scheduler error), and the preemption note.
func writeReasons(b *strings.Builder, pod *v1.Pod) {
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodScheduled || c.Status != v1.ConditionFalse {
			continue
		}
		fmt.Fprintf(b, "  %s:\n", c.Reason)
		m := parseSchedulingMessage(c.Message)
		indent := "    "
		if m.placements != "" {
			fmt.Fprintf(b, "%s%s:\n", indent, m.placements)
			indent += "  "
		}
		if m.nodes == "" {
			fmt.Fprintf(b, "%s%s\n", indent, m.reasons[0])
		} else {
			fmt.Fprintf(b, "%s%s:\n", indent, m.nodes)
			for _, r := range m.reasons {
				fmt.Fprintf(b, "%s  %s\n", indent, r)
			}
		}
		if m.preemption != "" {
			fmt.Fprintf(b, "    %s\n", m.preemption)
		}
		return
	}
	b.WriteString("  no scheduling attempt recorded yet\n")
}

// schedulingMessage is a PodScheduled message taken apart as
// kube-scheduler v1.37 composes it: a FitError's "0/N nodes are
// available: <reasons>. <PostFilter's message>", which a pod group's
// placement algorithm may wrap as "0/K placements are available, first
// placement status: <status>", after a pod group's "pod group is
// unschedulable, " and before its ", pod group preemption: ...", or a
// message of another form: a plugin's for the whole pod group
// (GPUCliquePlacement's), a scheduler error.
type schedulingMessage struct {
	// placements is the pod group's wrapper, "0/2 placements are
	// available, first placement status"; "" for none.
	placements string
	// nodes is "0/4 nodes are available" when reasons are per node
	// (with their node counts, or a PreFilter's for all nodes); "" when
	// reasons is the whole message, one reason.
	nodes   string
	reasons []string
	// preemption is the PostFilter's note, "preemption: ..." or "pod
	// group preemption: ..."; "" for none.
	preemption string
}

var (
	// groupUnschedulable is the text of the scheduler's
	// errPodGroupUnschedulable, which goes before a pod group's status
	// (once for the group, once more for its pods): the condition's
	// reason says as much.
	groupUnschedulable = regexp.MustCompile(`^(pod group is unschedulable, )+`)
	preemptionNote     = regexp.MustCompile(`[.:,] (pod group )?preemption: `)
	placementsHead     = regexp.MustCompile(`^(\d+/\d+ placements are available, first placement status): `)
	nodesHead          = regexp.MustCompile(`^(\d+/\d+ nodes are available):(?: |$)`)
)

func parseSchedulingMessage(msg string) schedulingMessage {
	var m schedulingMessage
	// The PostFilter's note: after a FitError's reasons (". ", or ": "
	// where there are none; "..., " after another PostFilter's), after a
	// pod group's status (", pod group preemption: "). A message that is
	// all note (a pod group preemption's error) stays whole.
	if loc := preemptionNote.FindStringIndex(msg); loc != nil && loc[0] > 0 {
		m.preemption = msg[loc[0]+2:]
		msg = strings.TrimSuffix(msg[:loc[0]+1], ",")
	}
	if rest := groupUnschedulable.ReplaceAllString(msg, ""); rest != "" {
		msg = rest
	}
	if h := placementsHead.FindStringSubmatch(msg); h != nil && len(msg) > len(h[0]) {
		m.placements = h[1]
		msg = msg[len(h[0]):]
	}
	if h := nodesHead.FindStringSubmatch(msg); h != nil && len(msg) > len(h[0]) {
		m.nodes = h[1]
		m.reasons = clauses(msg[len(h[0]):])
		return m
	}
	m.reasons = []string{msg}
	return m
}

// podClaim is one claim of a pod: its name, or, for an entry of
// spec.resourceClaims whose claim from a template does not exist yet,
// the entry and its template.
type podClaim struct {
	claim, entry, template string
	named                  bool // a claim of the user's, by name
	extended               bool // the pod's extended-resource claim
}

// podClaims are the pod's claims: its spec.resourceClaims entries, each
// naming a claim or a template whose claim pod.status names once
// created, and its extended-resource claim. An entry whose status says
// no claim was needed has none.
func podClaims(pod *v1.Pod) []podClaim {
	var out []podClaim
	for _, rc := range pod.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimName != nil:
			out = append(out, podClaim{claim: *rc.ResourceClaimName, named: true})
		case rc.ResourceClaimTemplateName != nil:
			i := slices.IndexFunc(pod.Status.ResourceClaimStatuses, func(s v1.PodResourceClaimStatus) bool { return s.Name == rc.Name })
			if i < 0 {
				out = append(out, podClaim{entry: rc.Name, template: *rc.ResourceClaimTemplateName})
			} else if n := ptr.Deref(pod.Status.ResourceClaimStatuses[i].ResourceClaimName, ""); n != "" {
				out = append(out, podClaim{claim: n})
			}
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		out = append(out, podClaim{claim: s.ResourceClaimName, extended: true})
	}
	return out
}

// writeClaim says what a claim asks for and what it got.
func writeClaim(b *strings.Builder, c *resourceapi.ResourceClaim, now time.Time) {
	fmt.Fprintf(b, "claim %s:\n", c.Name)
	for _, r := range c.Spec.Devices.Requests {
		switch {
		case r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll:
			fmt.Fprintf(b, "  request %s: all of class %s\n", r.Name, r.Exactly.DeviceClassName)
		case r.Exactly != nil:
			fmt.Fprintf(b, "  request %s: %d of class %s\n", r.Name, max(r.Exactly.Count, 1), r.Exactly.DeviceClassName)
		default:
			fmt.Fprintf(b, "  request %s: first available of %d alternatives\n", r.Name, len(r.FirstAvailable))
		}
	}
	if c.Status.Allocation == nil {
		b.WriteString("  not allocated\n")
		return
	}
	var devices []string
	for _, r := range c.Status.Allocation.Devices.Results {
		devices = append(devices, r.Pool+"/"+r.Device)
	}
	fmt.Fprintf(b, "  allocated: %s\n", strings.Join(devices, " "))
	if note := c.Annotations[contract.PlacementAnnotation]; note != "" {
		fmt.Fprintf(b, "  why these: %s\n", note)
	}
	writeBinding(b, c, now)
}

// writeBinding says where the allocation's device binding conditions
// stand (devices attached over a fabric report them): which devices
// report a failure, or still wait, and since when: the claim keeps its
// pod, or the pod's group, waiting where it is allocated until the
// scheduler's bindingTimeout passes.
func writeBinding(b *strings.Builder, c *resourceapi.ResourceClaim, now time.Time) {
	alloc := c.Status.Allocation
	failed, waiting := topology.BindingStatus(c)
	switch {
	case len(failed) > 0:
		fmt.Fprintf(b, "  binding failed: %s; the scheduler frees the claim at its pod's next attempt\n", topology.JoinDeviceConditions(failed))
	case len(waiting) == 0:
	case alloc.AllocationTimestamp == nil:
		fmt.Fprintf(b, "  binding: waiting for %s, with no allocation timestamp, so without a timeout\n", topology.JoinDeviceConditions(waiting))
	default:
		fmt.Fprintf(b, "  binding: waiting for %s, allocated %s ago; the scheduler frees the claim once its bindingTimeout passes\n",
			topology.JoinDeviceConditions(waiting), now.Sub(alloc.AllocationTimestamp.Time).Round(time.Second))
	}
}

// clauses splits a message into its reasons, each with how many nodes
// gave it ("1 Insufficient cpu, 2 node(s) had ..."): at the commas
// outside parentheses that a count follows. A message without counts
// (a PreFilter's, one for all nodes) is one reason, commas and all.
func clauses(msg string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range msg {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0 && countFollows(msg[i+1:]):
			out = append(out, strings.TrimSpace(msg[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(msg[start:]))
}

// countFollows: s starts with a node count, " 2 node(s) ...".
func countFollows(s string) bool {
	s = strings.TrimLeft(s, " ")
	digits := len(s) - len(strings.TrimLeft(s, "0123456789"))
	return digits > 0 && digits < len(s) && s[digits] == ' '
}
