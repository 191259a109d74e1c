// Package inspect shows a cluster's GPUs the way gputopo's scheduler
// sees them, for people (kubectl gputopo): each node's devices grouped
// by NVLink domain and multi-node clique, with what holds them.
package inspect

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Device is one published device and what holds it.
type Device struct {
	Node, Pool, Name string
	// Group is the device's NVLink domain ("pcie" without one), with its
	// multi-node clique when it has one; a MIG partition's is its GPU's.
	Group string
	// Type is the device's type attribute (gpu, mig), Model its product
	// and, for a MIG partition, its profile.
	Type, Model string
	// Holders: each claim allocated the device, as "ns/claim", with the
	// pods it is reserved for and, for a share, the capacity taken; an
	// admin-access allocation says "(admin access)".
	Holders []string
	// Held: a claim takes the device or a share of it. An admin-access
	// allocation does not: the scheduler counts it as not allocated.
	Held bool
	// Unavailable says why a device not held cannot be allocated now:
	// the devices allocated from its shared counters leave too little
	// for it ("counters of gpu-0 in use by gpu-0-mig-3g-0"); "" when
	// it fits.
	Unavailable string
	// Taints: those its slice publishes (the node agent's health taints)
	// and those DeviceTaintRules add, as "key=value:effect", a rule's
	// naming it, a None taint marked informational.
	Taints []string
	// KeptOff: a NoSchedule or NoExecute taint leaves the device to the
	// claims that tolerate it.
	KeptOff bool
}

// networkNode is the NODE of a device several nodes reach (a slice for
// all nodes or a node selector), which is no one node's.
const networkNode = "(network)"

// Devices lists the devices of each pool's newest generation (only those
// of node when not empty; a device's node is its slice's, or with
// perDeviceNodeSelection its own) with their holders from the claims and
// the taints of the slices and the rules, ordered by node, group and
// device name.
func Devices(published []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, rules []resourceapi.DeviceTaintRule, node string) []Device {
	current := newestGenerations(published)
	uses := usesByDevice(claims)
	ix := deviceIndex{uses: uses, counters: countersInUse(current, uses), parents: parentGroups(current), rules: rules}
	var out []Device
	for _, s := range current {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if n := topology.DeviceNode(s, d); node == "" || n == node {
				out = append(out, ix.device(s, d))
			}
		}
	}
	slices.SortFunc(out, func(a, b Device) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// deviceIndex is what Devices looks up per device.
type deviceIndex struct {
	uses     map[string]deviceUse // DeviceKey
	counters counterUse
	parents  map[string]string // driver/pool/uuid -> the GPU's group
	rules    []resourceapi.DeviceTaintRule
}

func (ix deviceIndex) device(s *resourceapi.ResourceSlice, d *resourceapi.Device) Device {
	driver, pool := s.Spec.Driver, s.Spec.Pool.Name
	n := topology.DeviceNode(s, d)
	g := topology.Describe(driver, n, d.Attributes)
	grp := group(g)
	if parent, ok := ix.parents[DeviceKey(driver, pool, g.Physical)]; g.Partition && ok {
		grp = parent
	}
	if n == "" {
		n = networkNode
	}
	use := ix.uses[DeviceKey(driver, pool, d.Name)]
	out := Device{
		Node: n, Pool: pool, Name: d.Name,
		Group: grp, Type: attr(*d, driver, contract.AttrType), Model: model(*d, driver),
		Holders: use.holders, Held: use.taken,
	}
	if !use.taken {
		out.Unavailable = ix.counters.blockedBy(driver, pool, d)
	}
	out.Taints, out.KeptOff = ix.taints(driver, pool, d)
	return out
}

// taints labels the device's own taints and those of the rules that
// select it, and reports whether one keeps claims off.
func (ix deviceIndex) taints(driver, pool string, d *resourceapi.Device) ([]string, bool) {
	var out []string
	keptOff := false
	label := func(t resourceapi.DeviceTaint, rule string) {
		l := fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
		if rule != "" {
			l += " (DeviceTaintRule " + rule + ")"
		}
		if topology.KeepsClaimsOff(t) {
			keptOff = true
		} else {
			l += " (informational)"
		}
		out = append(out, l)
	}
	for _, t := range d.Taints {
		label(t, "")
	}
	for i := range ix.rules {
		if ruleSelects(&ix.rules[i], driver, pool, d.Name) {
			label(ix.rules[i].Spec.Taint, ix.rules[i].Name)
		}
	}
	return out, keptOff
}

// ruleSelects reports whether a DeviceTaintRule taints the device, as the
// scheduler applies rules (k8s.io/dynamic-resource-allocation's slice
// tracker): its selector's driver, pool and device each match where set;
// a rule without a selector selects nothing.
func ruleSelects(r *resourceapi.DeviceTaintRule, driver, pool, device string) bool {
	sel := r.Spec.DeviceSelector
	if sel == nil {
		return false
	}
	match := func(want *string, have string) bool { return want == nil || *want == have }
	return match(sel.Driver, driver) && match(sel.Pool, pool) && match(sel.Device, device)
}

// parentGroups maps each whole GPU, as driver/pool/uuid, to its group:
// a MIG partition publishes no NVLink domain, and names its GPU by
// parentUUID.
func parentGroups(current []*resourceapi.ResourceSlice) map[string]string {
	out := map[string]string{}
	for _, s := range current {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			g := topology.Describe(s.Spec.Driver, topology.DeviceNode(s, d), d.Attributes)
			if !g.Partition && g.Physical != "" {
				out[DeviceKey(s.Spec.Driver, s.Spec.Pool.Name, g.Physical)] = group(g)
			}
		}
	}
	return out
}

// group names the device's NVLink domain and clique.
func group(g topology.GPU) string {
	out := "pcie"
	if g.NVLinkDomain != "" {
		out = "nvlink " + g.NVLinkDomain
	}
	if g.Clique != "" {
		out += ", clique " + g.Clique
	}
	return out
}

func attr(d resourceapi.Device, driver, id string) string {
	for _, name := range []resourceapi.QualifiedName{resourceapi.QualifiedName(id), resourceapi.QualifiedName(driver + "/" + id)} {
		if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

// consumer names what a claim is reserved for: a pod, a pod group
// (DRAWorkloadResourceClaims reserves a group's own claim for its
// PodGroup) or another kind, by resource and group.
func consumer(namespace string, r resourceapi.ResourceClaimConsumerReference) string {
	switch {
	case r.APIGroup == "" && r.Resource == "pods":
		return "pod " + namespace + "/" + r.Name
	case r.APIGroup == schedulingv1beta1.GroupName && r.Resource == "podgroups":
		return "pod group " + namespace + "/" + r.Name
	case r.APIGroup == "":
		return r.Resource + " " + namespace + "/" + r.Name
	}
	return r.Resource + "." + r.APIGroup + " " + namespace + "/" + r.Name
}

func model(d resourceapi.Device, driver string) string {
	m := attr(d, driver, contract.AttrProductName)
	if p := attr(d, driver, contract.AttrProfile); p != "" {
		m = strings.TrimSpace(m + " " + p)
	}
	return m
}

// deviceUse is what the claims' allocations say of one device.
type deviceUse struct {
	holders []string
	taken   bool // allocated, or a share of it, other than for admin access
}

// usesByDevice maps driver/pool/device to the claims allocated it.
func usesByDevice(claims []resourceapi.ResourceClaim) map[string]deviceUse {
	out := map[string]deviceUse{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		var consumers []string
		for _, r := range c.Status.ReservedFor {
			consumers = append(consumers, consumer(c.Namespace, r))
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			h := "claim " + c.Namespace + "/" + c.Name
			if r.ShareID != nil {
				h += " (share" + consumed(r.ConsumedCapacity) + ")"
			}
			held := holdsDevice(r)
			if !held {
				h += " (admin access)"
			}
			if len(consumers) > 0 {
				h += " for " + strings.Join(consumers, ", ")
			}
			k := DeviceKey(r.Driver, r.Pool, r.Device)
			u := out[k]
			u.holders = append(u.holders, h)
			u.taken = u.taken || held
			out[k] = u
		}
	}
	return out
}

func consumed(c map[resourceapi.QualifiedName]resource.Quantity) string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		q := c[resourceapi.QualifiedName(n)]
		fmt.Fprintf(&b, " %s %s", n, q.String())
	}
	return b.String()
}

// WriteDevices prints the devices as a table, one line per device and
// holder; then, for a device no claim takes, "unavailable: ..." where
// its shared counters are used up, else "free" unless a taint keeps
// claims off it; then one line per taint ("tainted key=value:effect").
func WriteDevices(w io.Writer, ds []Device) error {
	var b strings.Builder
	// Writes into a strings.Builder cannot fail.
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NODE\tNVLINK DOMAIN\tDEVICE\tTYPE\tMODEL\tHELD BY")
	for _, d := range ds {
		for i, h := range heldBy(d) {
			if i == 0 {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Node, d.Group, d.Name, d.Type, d.Model, h)
				continue
			}
			_, _ = fmt.Fprintf(tw, "\t\t\t\t\t%s\n", h)
		}
	}
	_ = tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// heldBy is the HELD BY column's lines of a device.
func heldBy(d Device) []string {
	out := slices.Clone(d.Holders)
	switch {
	case d.Held:
	case d.Unavailable != "":
		out = append(out, "unavailable: "+d.Unavailable)
	case !d.KeptOff:
		out = append(out, "free")
	}
	for _, t := range d.Taints {
		out = append(out, "tainted "+t)
	}
	return out
}

// Nodes reads the cluster's slices, claims and DeviceTaintRules (list on
// each: the read-only role of manifests/kubectl) and writes the table;
// warnings (rules it may not list) go to warn.
func Nodes(ctx context.Context, client kubernetes.Interface, node string, w, warn io.Writer) error {
	sl, err := nodeSlices(ctx, client, node)
	if err != nil {
		return err
	}
	claims, err := listClaims(ctx, client)
	if err != nil {
		return err
	}
	rules, err := listTaintRules(ctx, client, warn)
	if err != nil {
		return err
	}
	ds := Devices(sl, claims, rules, node)
	if len(ds) == 0 {
		if node != "" {
			return fmt.Errorf("node %s publishes no devices", node)
		}
		return fmt.Errorf("no ResourceSlices in the cluster: are the node agents running?")
	}
	return WriteDevices(w, ds)
}
