package replay

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/inspect"
)

// settle waits until every pod of the namespace is bound or marked
// unschedulable, and stays so for two polls.
func settle(ctx context.Context, client kubernetes.Interface, ns string) error {
	deadline := time.Now().Add(3 * time.Minute)
	stable := 0
	last := -1
	for time.Now().Before(deadline) {
		var pods *v1.PodList
		err := retryRead(func() (err error) {
			pods, err = client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		if err != nil {
			return err
		}
		bound, done := 0, true
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.NodeName != "" {
				bound++
				continue
			}
			if !unschedulable(&p) {
				done = false
			}
		}
		if done && bound == last {
			stable++
			if stable >= 2 {
				return nil
			}
		} else {
			stable = 0
		}
		last = bound
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("pods of %s still being scheduled after 3 minutes", ns)
}

// claimName is the "(claim ns/name, " of gputopo's reasons.
var claimName = regexp.MustCompile(`\(claim [^,]+, `)

func unschedulable(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// snapshot records where the namespace's pods are and what they hold.
func snapshot(ctx context.Context, client kubernetes.Interface, ns string, records map[string]*PodRecord) error {
	var pods *v1.PodList
	var claims *resourceapi.ResourceClaimList
	err := retryRead(func() (err error) {
		if pods, err = client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		claims, err = client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return err
	}
	devices := map[string][]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			devices[c.Name] = append(devices[c.Name], inspect.DeviceKey(r.Driver, r.Pool, r.Device))
		}
	}
	for _, p := range pods.Items {
		r := records[p.Name]
		if r == nil || r.Left {
			continue
		}
		r.Node = p.Spec.NodeName
		r.Bound = p.Spec.NodeName != ""
		r.Reason = ""
		r.Devices = nil
		for _, s := range p.Status.ResourceClaimStatuses {
			r.Devices = append(r.Devices, devices[ptr.Deref(s.ResourceClaimName, "")]...)
		}
		if s := p.Status.ExtendedResourceClaimStatus; s != nil {
			r.Devices = append(r.Devices, devices[s.ResourceClaimName]...)
		}
		if !r.Bound {
			r.Reason = reason(&p)
		}
	}
	return nil
}

// reason shortens the scheduler's message to what a person needs:
// without the node count preamble and the preemption epilogue.
func reason(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type != v1.PodScheduled || c.Status != v1.ConditionFalse {
			continue
		}
		m := c.Message
		if i := strings.Index(m, " preemption:"); i >= 0 {
			m = m[:i]
		}
		if i := strings.Index(m, "are available: "); i >= 0 {
			m = m[i+len("are available: "):]
		}
		// Per-node clauses without the claim's generated name, and
		// without the other copy of the fleet, which the pod's node
		// selector excludes by design.
		m = claimName.ReplaceAllString(strings.TrimSuffix(strings.TrimSpace(m), "."), "(")
		if m = mergeClauses(splitClauses(m)); m == "" {
			return "no node fits"
		}
		return m
	}
	return "not yet scheduled"
}

// splitClauses splits the scheduler's "N reason, M reason (detail, more)"
// at the commas between clauses, not those inside parentheses.
func splitClauses(m string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range m {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(m[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(m[start:]))
}

// mergeClauses drops node counts and the fleet copy the pod's selector
// excludes, and keeps one clause per kind: a kind whose details differ
// between more than maxDetails kinds of node (how many devices match
// there) is named without them, so that pods pending for the same reasons
// group together on a large fleet.
func mergeClauses(parts []string) string {
	details := map[string]map[string]bool{}
	var kinds []string
	for _, part := range parts {
		if part == "" || strings.Contains(part, "didn't match Pod's node affinity/selector") {
			continue
		}
		if i := strings.IndexByte(part, ' '); i > 0 && strings.Trim(part[:i], "0123456789") == "" {
			part = part[i+1:]
		}
		kind := part
		if i := strings.Index(part, " ("); i > 0 {
			kind = part[:i]
		}
		if details[kind] == nil {
			details[kind] = map[string]bool{}
			kinds = append(kinds, kind)
		}
		details[kind][part] = true
	}
	slices.Sort(kinds)
	for i, k := range kinds {
		// Nodes with no matching device at all say nothing the nodes
		// with some do not.
		variants := slices.DeleteFunc(slices.Sorted(maps.Keys(details[k])), func(v string) bool {
			return strings.Contains(v, " 0 match,") && len(details[k]) > 1
		})
		if len(variants) > 0 && len(variants) <= maxDetails {
			kinds[i] = strings.Join(variants, ", ")
		}
	}
	return strings.Join(kinds, ", ")
}

// maxDetails is how many variants of one kind of clause a reason keeps
// in full: enough for a small fleet's few node shapes, few enough that
// the openb fleet's pods group into a handful of reasons.
const maxDetails = 3
