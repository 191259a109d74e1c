package inspect

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Cluster is what the report reads of a live cluster.
type Cluster struct {
	Slices []resourceapi.ResourceSlice
	Claims []resourceapi.ResourceClaim
	Rules  []resourceapi.DeviceTaintRule
	// Pods: ReadCluster lists those that have not ended only, all the
	// report counts.
	Pods []v1.Pod
}

// ReadCluster lists the cluster's slices, claims, DeviceTaintRules and
// pods that have not ended (list on each: the read-only role of
// manifests/kubectl), in pages; warnings (rules it may not list) go to
// warn.
func ReadCluster(ctx context.Context, client kubernetes.Interface, warn io.Writer) (Cluster, error) {
	var c Cluster
	var err error
	if c.Slices, err = listSlices(ctx, client, metav1.ListOptions{}); err != nil {
		return Cluster{}, err
	}
	if c.Claims, err = listClaims(ctx, client); err != nil {
		return Cluster{}, err
	}
	if c.Rules, err = listTaintRules(ctx, client, warn); err != nil {
		return Cluster{}, err
	}
	if c.Pods, err = listUnfinishedPods(ctx, client); err != nil {
		return Cluster{}, err
	}
	return c, nil
}

// maxPendingRows bounds the table of pending pods: the by-reason counts
// cover them all.
const maxPendingRows = 50

// LiveReport is the demo's report for a cluster's current state:
// occupancy per node and NVLink domain, the link class of every claim for
// several GPUs, the fleet's fragmentation, and the pending pods with the
// scheduler's reasons.
func LiveReport(c Cluster, title string, now time.Time) report.Report {
	view := NewFleetView(c.Slices, nil)
	r := report.Result{Name: "cluster", Snapshot: true, LinkClasses: map[string]int{}, Pending: map[string]int{}}
	for _, lc := range topology.LinkClasses() {
		r.LinkClassOrder = append(r.LinkClassOrder, lc.String())
	}
	for _, claim := range c.Claims {
		if lc, ok := claimLinkClass(view, claim); ok {
			r.LinkClasses[lc]++
		}
	}
	r.Nodes = view.Occupancy(c.Claims)
	r.UnallocatedGPUPercent = unallocatedPercent(r.Nodes)
	pending := pendingPods(c.Pods)
	for _, p := range c.Pods {
		if p.Spec.NodeName != "" && !ended(&p) {
			r.PodsPlaced++
		}
	}
	r.PodsPending = len(pending)
	for _, p := range pending {
		for _, reason := range p.reasons {
			r.Pending[reason]++
		}
	}
	summary := topology.SummarizeFleet(pointers(withRuleTaints(c.Slices, c.Rules)), ClaimUsage(c.Claims), nil)
	return report.Report{
		Title:      title,
		Scenario:   "live cluster",
		Generated:  now,
		Schedulers: []report.Result{r},
		Tables:     []report.Table{fleetTable(summary), pendingTable(pending)},
		Notes: []string{
			"Read from the API server at the time above: ResourceSlices, ResourceClaims, DeviceTaintRules and Pods (kubectl gputopo report).",
			"Pods placed counts bound pods that have not ended; pending pods are those without a node, with the reasons of their PodScheduled condition.",
		},
	}
}

// WriteLiveReport reads the cluster and writes its HTML report;
// warnings go to warn.
func WriteLiveReport(ctx context.Context, client kubernetes.Interface, title string, now time.Time, w, warn io.Writer) error {
	c, err := ReadCluster(ctx, client, warn)
	if err != nil {
		return err
	}
	if len(c.Slices) == 0 {
		return fmt.Errorf("no ResourceSlices in the cluster: are the node agents running?")
	}
	return report.WriteHTML(w, LiveReport(c, title, now))
}

// claimLinkClass is the worst link between the whole GPUs of an allocated
// claim of two or more, as the scheduler's link-class metric counts it;
// devices allocated for admin access are not the claim's.
func claimLinkClass(view FleetView, claim resourceapi.ResourceClaim) (string, bool) {
	if claim.Status.Allocation == nil {
		return "", false
	}
	var gpus []topology.GPU
	for _, res := range claim.Status.Allocation.Devices.Results {
		if !holdsDevice(res) {
			continue
		}
		if g, ok := view.GPU(DeviceKey(res.Driver, res.Pool, res.Device)); ok && !g.Partition {
			gpus = append(gpus, g)
		}
	}
	if len(gpus) < 2 {
		return "", false
	}
	return topology.WorstPair(gpus).String(), true
}

func unallocatedPercent(nodes []report.NodeUse) float64 {
	total, used := gpuUse(nodes)
	if total == 0 {
		// No GPU to be free: "n/a" on the card, not 0% (all in use).
		return math.NaN()
	}
	return 100 * (1 - used/float64(total))
}

// gpuUse counts the GPUs of the occupancy and their used shares.
func gpuUse(nodes []report.NodeUse) (gpus int, used float64) {
	for _, n := range nodes {
		for _, d := range n.Domains {
			for _, u := range d.GPUs {
				gpus++
				used += u
			}
		}
	}
	return gpus, used
}

// ClaimUsage is what the claims' allocations hold of each device, for
// topology.SummarizeFleet: devices allocated whole, and the shares of
// devices that allow several allocations with the capacity they consume.
// An admin-access allocation holds nothing: the scheduler counts it as
// not allocated.
func ClaimUsage(claims []resourceapi.ResourceClaim) topology.DeviceUsage {
	use := map[string]topology.DeviceUse{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if !holdsDevice(res) {
				continue
			}
			key := DeviceKey(res.Driver, res.Pool, res.Device)
			u := use[key]
			if res.ShareID == nil {
				u.Exclusive = true
				use[key] = u
				continue
			}
			u.Shared = true
			for name, q := range res.ConsumedCapacity {
				if u.Consumed == nil {
					u.Consumed = map[resourceapi.QualifiedName]*resource.Quantity{}
				}
				sum := q.DeepCopy()
				if prev, ok := u.Consumed[name]; ok {
					sum.Add(*prev)
				}
				u.Consumed[name] = &sum
			}
			use[key] = u
		}
	}
	return func(driver, pool, device string) topology.DeviceUse { return use[DeviceKey(driver, pool, device)] }
}

// withRuleTaints is the slices with the taints of the rules that select
// their devices added, as the scheduler sees them; a slice no rule
// touches is not copied.
func withRuleTaints(published []resourceapi.ResourceSlice, rules []resourceapi.DeviceTaintRule) []resourceapi.ResourceSlice {
	out := slices.Clone(published)
	for i := range out {
		copied := false
		for j, d := range out[i].Spec.Devices {
			for k := range rules {
				if !ruleSelects(&rules[k], out[i].Spec.Driver, out[i].Spec.Pool.Name, d.Name) {
					continue
				}
				if !copied {
					out[i] = *out[i].DeepCopy()
					copied = true
				}
				out[i].Spec.Devices[j].Taints = append(out[i].Spec.Devices[j].Taints, rules[k].Spec.Taint)
			}
		}
	}
	return out
}

func pointers(s []resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func fleetTable(s topology.FleetSummary) report.Table {
	t := report.Table{Caption: "Fleet fragmentation (the scheduler's gputopo_fleet_* gauges)", Head: []string{"measure", "value"}}
	row := func(label string, v int) { t.Rows = append(t.Rows, []string{label, strconv.Itoa(v)}) }
	row("GPUs", s.GPUs)
	row("GPUs free", s.Free)
	row("GPUs partly used (MIG partitions or shares, room left)", s.Partial)
	row("GPUs used", s.Used)
	// Taints as the scheduler sees them: the slices' own and the
	// DeviceTaintRules' (those the reader may list).
	total, each := 0, make([]string, len(topology.GPUStates))
	for i, state := range topology.GPUStates {
		total += s.Tainted[state]
		each[i] = strconv.Itoa(s.Tainted[state])
	}
	t.Rows = append(t.Rows, []string{"GPUs tainted (free / partly used / used)", fmt.Sprintf("%d (%s)", total, strings.Join(each, " / "))})
	row("free GPUs stranded (their NVLink domain or node is partly used)", s.Stranded)
	t.Rows = append(t.Rows, []string{"NVLink domains wholly free", fmt.Sprintf("%d of %d", s.FreeNVLinkDomains, s.NVLinkDomains)})
	t.Rows = append(t.Rows, []string{"multi-node cliques wholly free", fmt.Sprintf("%d of %d", s.FreeCliques, s.Cliques)})
	for _, profile := range slices.Sorted(maps.Keys(s.MIGPlaceable)) {
		row("MIG "+profile+" instances placeable now", s.MIGPlaceable[profile])
	}
	return t
}

// pendingPod is a pod without a node and the reasons it gives.
type pendingPod struct {
	name, scheduler, message string
	reasons                  []string
}

func pendingPods(pods []v1.Pod) []pendingPod {
	var out []pendingPod
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || ended(&p) {
			continue
		}
		pp := pendingPod{name: p.Namespace + "/" + p.Name, scheduler: p.Spec.SchedulerName}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				pp.message = c.Message
				pp.reasons = reasonsOf(c.Reason, c.Message)
			}
		}
		if len(pp.reasons) == 0 {
			pp.reasons = []string{"no scheduling attempt recorded yet"}
		}
		out = append(out, pp)
	}
	slices.SortFunc(out, func(a, b pendingPod) int { return strings.Compare(a.name, b.name) })
	return out
}

// leadingCount is a clause's node count ("3 node(s) ..."): the reasons
// are counted over pods, so the per-pod node counts go.
var leadingCount = regexp.MustCompile(`^\d+ `)

// reasonsOf is a PodScheduled message's reasons, so that pods with the
// same reasons count together (the pending pods' table keeps the whole
// message): per-node reasons (a pod group's placement's too) without
// their node counts and per-node details in parentheses, any other
// message whole after the condition's reason; never the preemption note.
func reasonsOf(reason, msg string) []string {
	m := parseSchedulingMessage(msg)
	if m.nodes == "" {
		return []string{reason + ": " + m.reasons[0]}
	}
	var out []string
	for _, clause := range m.reasons {
		clause = withoutParentheses(strings.TrimSuffix(clause, "."))
		clause = strings.TrimSuffix(leadingCount.ReplaceAllString(clause, ""), ".")
		if clause != "" && !slices.Contains(out, clause) {
			out = append(out, clause)
		}
	}
	return out
}

func pendingTable(pods []pendingPod) report.Table {
	t := report.Table{Caption: "Pending pods", Head: []string{"pod", "scheduler", "scheduler's message"}}
	for i, p := range pods {
		if i == maxPendingRows {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("and %d more", len(pods)-maxPendingRows), "", ""})
			break
		}
		msg := p.message
		if msg == "" {
			msg = "no scheduling attempt recorded yet"
		}
		t.Rows = append(t.Rows, []string{p.name, p.scheduler, msg})
	}
	if len(pods) == 0 {
		t.Rows = append(t.Rows, []string{"none", "", ""})
	}
	return t
}

// withoutParentheses drops the parenthesized parts of a clause that
// follow a space: the per-node details of gputopo's reasons ("(claim a,
// request r: needs 9, 4 match, 1 free)"), not the "(s)" of "node(s)".
func withoutParentheses(s string) string {
	var b strings.Builder
	depth := 0
	prev := ' '
	for _, r := range s {
		after := prev
		prev = r
		switch {
		case r == '(' && (depth > 0 || after == ' '):
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
