package inspect

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// The scheduler's PodScheduled messages, as kube-scheduler v1.37 writes
// them, one reason a line: per node only under "N/M nodes are
// available", a pod group's placement wrapper kept, any other message
// (a plugin's for the whole group, a scheduler error) whole.
func TestWriteReasons(t *testing.T) {
	for _, tc := range []struct {
		name, reason, msg, want string
	}{
		{"per node, with preemption", "Unschedulable",
			"0/1 nodes are available: 1 cannot allocate all claims (nvidia.com/gpu of container c: needs 9, 8 match, 4 free (4 in use)). preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
			"  Unschedulable:\n    0/1 nodes are available:\n      1 cannot allocate all claims (nvidia.com/gpu of container c: needs 9, 8 match, 4 free (4 in use)).\n    preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.\n"},
		{"per node, a colon in a reason", "Unschedulable",
			"0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
			"  Unschedulable:\n    0/3 nodes are available:\n      1 Insufficient cpu\n      2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.\n    preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.\n"},
		{"GPUCliquePlacement's, whole", "Unschedulable",
			"the pod group needs at least 80 free GPUs in one nvidia.com/gpu.clique domain; the most free in one is 72, and the largest holds 72 GPUs in all: lower the gang's minCount or drop the topology constraint",
			"  Unschedulable:\n    the pod group needs at least 80 free GPUs in one nvidia.com/gpu.clique domain; the most free in one is 72, and the largest holds 72 GPUs in all: lower the gang's minCount or drop the topology constraint\n"},
		{"a placement's nodes", "Unschedulable",
			"0/2 placements are available, first placement status: 0/18 nodes are available: 18 cannot allocate all claims.",
			"  Unschedulable:\n    0/2 placements are available, first placement status:\n      0/18 nodes are available:\n        18 cannot allocate all claims.\n"},
		{"a placement's gang, the group's preemption", "Unschedulable",
			"pod group is unschedulable, pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, pod group preemption: No preemption victims found for incoming preemptor",
			"  Unschedulable:\n    0/2 placements are available, first placement status:\n      minCount (4) cannot be satisfied: 3 scheduled, 0 remaining\n    pod group preemption: No preemption victims found for incoming preemptor\n"},
		{"the gang alone", "Unschedulable",
			"pod group is unschedulable, minCount (4) cannot be satisfied: 0 scheduled, 3 remaining",
			"  Unschedulable:\n    minCount (4) cannot be satisfied: 0 scheduled, 3 remaining\n"},
		{"the group alone", "Unschedulable", "pod group is unschedulable", "  Unschedulable:\n    pod group is unschedulable\n"},
		{"scheduler error", "SchedulerError",
			`running PreBind plugin "GPUTopology": binding claims: resourceclaims "c" is forbidden`,
			"  SchedulerError:\n    running PreBind plugin \"GPUTopology\": binding claims: resourceclaims \"c\" is forbidden\n"},
		{"a pod group preemption's error, whole", "SchedulerError",
			"pod group preemption: failed to start mutations: the server is shutting down",
			"  SchedulerError:\n    pod group preemption: failed to start mutations: the server is shutting down\n"},
		{"no nodes", "Unschedulable", "no nodes available to schedule pods", "  Unschedulable:\n    no nodes available to schedule pods\n"},
		{"no attempt", "", "", "  no scheduling attempt recorded yet\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podPending("ml", "p", "gputopo-scheduler", tc.msg)
			if tc.msg != "" {
				pod.Status.Conditions[0].Reason = tc.reason
			}
			var b strings.Builder
			writeReasons(&b, &pod)
			if got := b.String(); got != tc.want {
				t.Errorf("written\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// The report counts pods by reason: the per-node reasons without their
// counts and details, the same whether a pod group's placement wraps
// them or not; any other message is one reason.
func TestReasonsOf(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      []string
	}{
		{"per node, with preemption",
			"0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
			[]string{"cannot allocate all claims", "node(s) didn't match Pod's node affinity/selector"}},
		{"a placement's nodes",
			"0/2 placements are available, first placement status: 0/18 nodes are available: 18 cannot allocate all claims.",
			[]string{"cannot allocate all claims"}},
		{"PreFilter's, for every node",
			"0/4 nodes are available: resourceclaim ns/c, request gpus: device class x does not exist.",
			[]string{"resourceclaim ns/c, request gpus: device class x does not exist"}},
		{"GPUCliquePlacement's, whole",
			"the pod group needs at least 80 free GPUs in one nvidia.com/gpu.clique domain; the most free in one is 72, and the largest holds 72 GPUs in all: lower the gang's minCount or drop the topology constraint",
			[]string{"Unschedulable: the pod group needs at least 80 free GPUs in one nvidia.com/gpu.clique domain; the most free in one is 72, and the largest holds 72 GPUs in all: lower the gang's minCount or drop the topology constraint"}},
		{"the gang",
			"pod group is unschedulable, minCount (4) cannot be satisfied: 0 scheduled, 3 remaining",
			[]string{"Unschedulable: minCount (4) cannot be satisfied: 0 scheduled, 3 remaining"}},
		{"a placement's gang, the group's preemption",
			"pod group is unschedulable, pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, pod group preemption: No preemption victims found for incoming preemptor",
			[]string{"Unschedulable: minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"}},
		{"no nodes", "no nodes available to schedule pods", []string{"Unschedulable: no nodes available to schedule pods"}},
		{"per node, without reasons",
			"0/1 nodes are available: preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
			[]string{"Unschedulable: 0/1 nodes are available:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reasonsOf("Unschedulable", tc.msg); !slices.Equal(got, tc.want) {
				t.Errorf("reasons %q, want %q", got, tc.want)
			}
		})
	}
}

// The card's unallocated share: n/a, not 0%, where the cluster has no
// GPU (another driver's devices only), which would read as all in use.
func TestUnallocatedNow(t *testing.T) {
	nic := slice("a", device("a-0", nil))
	nic.Spec.Driver = "nic.example.com"
	for _, tc := range []struct {
		name   string
		slices []resourceapi.ResourceSlice
		claims []resourceapi.ResourceClaim
		want   string
	}{
		{"no GPU", []resourceapi.ResourceSlice{nic}, nil, "n/a"},
		{"all free", []resourceapi.ResourceSlice{nic, slice("b", device("b-0", gpu("b0", "nv-b")), device("b-1", gpu("b1", "nv-b")))}, nil, "100.00%"},
		{"half used", []resourceapi.ResourceSlice{slice("b", device("b-0", gpu("b0", "nv-b")), device("b-1", gpu("b1", "nv-b")))},
			[]resourceapi.ResourceClaim{allocated("ml", "one", "p", result("b", "b-0"))}, "50.00%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := LiveReport(Cluster{Slices: tc.slices, Claims: tc.claims}, "test cluster", time.Unix(0, 0))
			var b strings.Builder
			if err := report.WriteHTML(&b, r); err != nil {
				t.Fatal(err)
			}
			card := regexp.MustCompile(`data-figure="unallocated-[^"]*">([^<]*)<`).FindStringSubmatch(b.String())
			if card == nil || card[1] != tc.want {
				t.Errorf("card %q (%v), want %q", card, r.Schedulers[0].UnallocatedGPUPercent, tc.want)
			}
			var sum strings.Builder
			if err := report.WriteSummary(&sum, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sum.String(), tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, sum.String())
			}
		})
	}
}
