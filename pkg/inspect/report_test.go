package inspect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	cgotesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/demo/report"
)

func gpu(name, domain string) map[string]string {
	return map[string]string{"type": "gpu", "uuid": "GPU-" + name, "nvlinkDomain": domain, "productName": "NVIDIA H100 80GB HBM3"}
}

// unhealthy taints d as the node agent taints a GPU that failed.
func unhealthy(d resourceapi.Device) resourceapi.Device {
	d.Taints = []resourceapi.DeviceTaint{{Key: "gputopo.dev/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoExecute}}
	return d
}

func podPending(ns, name, scheduler, msg string) v1.Pod {
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.PodSpec{SchedulerName: scheduler}, Status: v1.PodStatus{Phase: v1.PodPending}}
	if msg != "" {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
	}
	return p
}

// The live report's figures: occupancy per GPU, the link class of each
// claim for several GPUs, the fleet's fragmentation, pending pods counted
// by reason without their node counts.
func TestLiveReport(t *testing.T) {
	share := result("b", "b-0")
	share.ShareID = ptr.To(types.UID("s1"))
	share.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"compute": resource.MustParse("25")}
	l40s := func(name string) resourceapi.Device {
		d := device(name, map[string]string{"type": "gpu", "uuid": "GPU-" + name, "productName": "NVIDIA L40S"})
		d.AllowMultipleAllocations = ptr.To(true)
		return d
	}
	c := Cluster{
		Slices: []resourceapi.ResourceSlice{
			slice("a", device("a-0", gpu("a0", "nv-a")), device("a-1", gpu("a1", "nv-a")), device("a-2", gpu("a2", "nv-a")), device("a-3", gpu("a3", "nv-a"))),
			slice("b", l40s("b-0"), unhealthy(l40s("b-1"))),
		},
		Claims: []resourceapi.ResourceClaim{
			allocated("ml", "tp2", "train", result("a", "a-0"), result("a", "a-1")),
			allocated("web", "chat", "chat", share),
		},
		Pods: []v1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}, Spec: v1.PodSpec{NodeName: "a"}, Status: v1.PodStatus{Phase: v1.PodRunning}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "done"}, Spec: v1.PodSpec{NodeName: "a"}, Status: v1.PodStatus{Phase: v1.PodSucceeded}},
			podPending("ml", "big", "gputopo-scheduler", "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."),
			podPending("ml", "bigger", "gputopo-scheduler", "0/2 nodes are available: 1 cannot allocate all claims (claim ml/x, request gpus: needs 9, 4 match, 1 free (3 in use)), 1 cannot allocate all claims (claim ml/x, request gpus: needs 9, 4 match, 4 free)."),
			podPending("ml", "new", "gputopo-scheduler", ""),
		},
	}
	r := LiveReport(c, "test cluster", time.Unix(0, 0))
	res := r.Schedulers[0]
	if res.PodsPlaced != 1 || res.PodsPending != 3 {
		t.Errorf("placed %d, pending %d; want 1 and 3", res.PodsPlaced, res.PodsPending)
	}
	if got := res.Pending; got["cannot allocate all claims"] != 2 || got["node(s) didn't match Pod's node affinity/selector"] != 1 || got["no scheduling attempt recorded yet"] != 1 || len(got) != 3 {
		t.Errorf("pending by reason %v", got)
	}
	if got := res.LinkClasses; len(got) != 1 || got["nvlink"]+got["nvswitch"] != 1 {
		t.Errorf("link classes %v: want the one claim of two GPUs in one NVLink domain", got)
	}
	// 2 whole GPUs and a quarter of one used of 6.
	if want := 100 * (1 - 2.25/6); res.UnallocatedGPUPercent < want-0.01 || res.UnallocatedGPUPercent > want+0.01 {
		t.Errorf("unallocated %.2f%%, want %.2f%%", res.UnallocatedGPUPercent, want)
	}
	if len(res.Nodes) != 2 || res.Nodes[0].Name != "a" || res.Nodes[0].Shape != "NVIDIA H100 80GB HBM3" || len(res.Nodes[0].Domains[0].GPUs) != 4 {
		t.Errorf("occupancy %+v", res.Nodes)
	}
	fleet := tableRows(r.Tables[0])
	for label, want := range map[string]string{
		"GPUs": "6", "GPUs free": "3", "GPUs used": "2", "GPUs partly used (MIG partitions or shares, room left)": "1",
		"NVLink domains wholly free":               "0 of 1",
		"GPUs tainted (free / partly used / used)": "1 (1 / 0 / 0)",
	} {
		if fleet[label] != want {
			t.Errorf("fleet %q = %q, want %q (table %v)", label, fleet[label], want, fleet)
		}
	}
	pending := tableRows(r.Tables[1])
	if len(pending) != 3 || pending["ml/new"] != "gputopo-scheduler" {
		t.Errorf("pending table %v", r.Tables[1].Rows)
	}
	var b strings.Builder
	if err := report.WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"test cluster", "id=\"occupancy\"", "cannot allocate all claims", "Fleet fragmentation"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(b.String(), "pods/s") || !strings.Contains(b.String(), "GPU capacity unallocated now") {
		t.Errorf("a live cluster's report shows a run's rate, or not the current unallocated share")
	}
	if strings.Contains(b.String(), "id=\"unallocated\"") {
		t.Errorf("a live cluster has no arrival curve, the HTML draws one")
	}
}

func tableRows(t report.Table) map[string]string {
	out := map[string]string{}
	for _, r := range t.Rows {
		out[r[0]] = r[1]
	}
	return out
}

// A PodGroup the user may not read is not reported as one the scheduler
// waits for.
func TestPodGroupReadRefused(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("get", "podgroups", func(cgotesting.Action) (bool, apiruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "podgroups"}, "g", errors.New("no"))
	})
	var b strings.Builder
	writeGroup(context.Background(), client, &b, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}}, "g")
	if out := b.String(); !strings.Contains(out, "forbidden") || strings.Contains(out, "waits for the PodGroup") {
		t.Errorf("output %q, want the error without the note on a missing PodGroup", out)
	}
}
