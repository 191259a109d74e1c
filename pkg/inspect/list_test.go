package inspect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	cgotesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// listed records the options of each list request, by resource.
type listed struct {
	sync.Mutex
	opts map[string][]metav1.ListOptions
}

func (l *listed) add(resource string, o metav1.ListOptions) {
	l.Lock()
	defer l.Unlock()
	if l.opts == nil {
		l.opts = map[string][]metav1.ListOptions{}
	}
	l.opts[resource] = append(l.opts[resource], o)
}

// servePages makes the fake client answer lists of resource in pages of
// the request's limit with continue tokens, and with the items whose
// fields (nil: none) match the field selector, as the API server does.
func servePages[T any](client *fake.Clientset, seen *listed, resource string, all []T, fieldsOf func(T) fields.Set, list func([]T, string) apiruntime.Object) {
	client.PrependReactor("list", resource, func(a cgotesting.Action) (bool, apiruntime.Object, error) {
		o := a.(cgotesting.ListActionImpl).ListOptions
		seen.add(resource, o)
		items := all
		if fieldsOf != nil && o.FieldSelector != "" {
			items = nil
			sel := fields.ParseSelectorOrDie(o.FieldSelector)
			for _, item := range all {
				if sel.Matches(fieldsOf(item)) {
					items = append(items, item)
				}
			}
		}
		start, _ := strconv.Atoi(o.Continue)
		end := len(items)
		if o.Limit > 0 {
			end = min(start+int(o.Limit), end)
		}
		next := ""
		if end < len(items) {
			next = strconv.Itoa(end)
		}
		return true, list(items[start:end], next), nil
	})
}

// The report and nodes list the cluster in pages of 500, not in one
// response; the report lists only the pods that have not ended (all it
// counts), and nodes --node only the node's slices and those of no node
// (whose devices may be the node's).
func TestListsInPages(t *testing.T) {
	var sl []resourceapi.ResourceSlice
	var pods []v1.Pod
	for i := range 1201 {
		node := fmt.Sprintf("n%04d", i)
		sl = append(sl, slice(node, device("gpu-0", gpu(node, "d"))))
		pods = append(pods, podPending("ml", node, "gputopo-scheduler", ""))
	}
	// A device placed by its own nodeName, in a slice of no node.
	fabric := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", PerDeviceNodeSelection: ptr.To(true),
		Pool: resourceapi.ResourcePool{Name: "fabric", ResourceSliceCount: 1}, Devices: []resourceapi.Device{device("f-0", gpu("f0", ""))}}}
	fabric.Spec.Devices[0].NodeName = ptr.To("n0007")
	sl = append(sl, fabric)
	client := fake.NewClientset()
	var seen listed
	nodeName := func(s resourceapi.ResourceSlice) fields.Set {
		return fields.Set{resourceapi.ResourceSliceSelectorNodeName: ptr.Deref(s.Spec.NodeName, "")}
	}
	servePages(client, &seen, "resourceslices", sl, nodeName, func(items []resourceapi.ResourceSlice, next string) apiruntime.Object {
		return &resourceapi.ResourceSliceList{ListMeta: metav1.ListMeta{Continue: next}, Items: items}
	})
	servePages(client, &seen, "pods", pods, nil, func(items []v1.Pod, next string) apiruntime.Object {
		return &v1.PodList{ListMeta: metav1.ListMeta{Continue: next}, Items: items}
	})
	c, err := ReadCluster(context.Background(), client, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Slices) != 1202 || len(c.Pods) != 1201 {
		t.Errorf("read %d slices, %d pods; want 1202 and 1201", len(c.Slices), len(c.Pods))
	}
	for _, resource := range []string{"resourceslices", "pods"} {
		var got []string
		for _, o := range seen.opts[resource] {
			got = append(got, fmt.Sprintf("limit %d continue %q", o.Limit, o.Continue))
		}
		if want := `limit 500 continue ""|limit 500 continue "500"|limit 500 continue "1000"`; strings.Join(got, "|") != want {
			t.Errorf("%s listed as %q, want %q", resource, got, want)
		}
	}
	if got := seen.opts["pods"][0].FieldSelector; got != "status.phase!=Succeeded,status.phase!=Failed" {
		t.Errorf("pods listed with field selector %q, want the unfinished ones", got)
	}

	seen = listed{}
	var out strings.Builder
	if err := Nodes(context.Background(), client, "n0007", &out, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "n0007 ") || !strings.Contains(lines[2], "f-0") {
		t.Errorf("nodes --node n0007:\n%s", out.String())
	}
	var selectors []string
	for _, o := range seen.opts["resourceslices"] {
		selectors = append(selectors, o.FieldSelector)
	}
	if want := "spec.nodeName=n0007|spec.nodeName="; strings.Join(selectors, "|") != want {
		t.Errorf("nodes --node lists slices with %q, want %q", selectors, want)
	}
}

// Without the right to list DeviceTaintRules (a role from before they
// were read) nodes still shows the devices, with a warning on stderr;
// an API server that does not serve them has none, and says nothing.
func TestTaintRulesNotReadable(t *testing.T) {
	notServed := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound}}
	for _, tc := range []struct {
		name, warning string
		err           error
	}{
		{"forbidden", "Warning: DeviceTaintRules not read, their taints are not shown", apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "devicetaintrules"}, "", errors.New("no"))},
		{"not served", "", notServed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := slice("a", device("a-0", gpu("a0", "d")))
			client := fake.NewClientset(&s)
			client.PrependReactor("list", "devicetaintrules", func(cgotesting.Action) (bool, apiruntime.Object, error) { return true, nil, tc.err })
			var out, warn strings.Builder
			if err := Nodes(context.Background(), client, "", &out, &warn); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "a-0") || tc.warning == "" && warn.Len() > 0 || !strings.Contains(warn.String(), tc.warning) {
				t.Errorf("table\n%s\nwarning %q, want %q", out.String(), warn.String(), tc.warning)
			}
		})
	}
}
