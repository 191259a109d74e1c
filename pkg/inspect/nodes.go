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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Device is one published device and what holds it.
type Device struct {
	Node, Pool, Name string
	// Group is the device's NVLink domain ("pcie" without one), with its
	// multi-node clique when it has one.
	Group string
	// Type is the device's type attribute (gpu, mig), Model its product
	// and, for a MIG partition, its profile.
	Type, Model string
	// Holders: each claim allocated the device, as "ns/claim", with the
	// pods it is reserved for and, for a share, the capacity taken.
	Holders []string
	// Taints its slice publishes (the node agent's health taints), as
	// "key=value:effect": the scheduler leaves a tainted device to claims
	// that tolerate it.
	Taints []string
}

// networkNode is the NODE of a device several nodes reach (a slice for
// all nodes or a node selector), which is no one node's.
const networkNode = "(network)"

// Devices lists the devices of each pool's newest generation (only those
// of node when not empty; a device's node is its slice's, or with
// perDeviceNodeSelection its own) with their holders from the claims,
// ordered by node, group and device name.
func Devices(published []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, node string) []Device {
	holders := holdersByDevice(claims)
	var out []Device
	for _, s := range newestGenerations(published) {
		for _, d := range s.Spec.Devices {
			n := topology.DeviceNode(s, &d)
			if node != "" && n != node {
				continue
			}
			g := topology.Describe(s.Spec.Driver, n, d.Attributes)
			if n == "" {
				n = networkNode
			}
			out = append(out, Device{
				Node: n, Pool: s.Spec.Pool.Name, Name: d.Name,
				Group: group(g), Type: attr(d, s.Spec.Driver, contract.AttrType), Model: model(d, s.Spec.Driver),
				Holders: holders[s.Spec.Driver+"/"+s.Spec.Pool.Name+"/"+d.Name], Taints: taints(d),
			})
		}
	}
	slices.SortFunc(out, func(a, b Device) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func taints(d resourceapi.Device) []string {
	var out []string
	for _, t := range d.Taints {
		out = append(out, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
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

func model(d resourceapi.Device, driver string) string {
	m := attr(d, driver, contract.AttrProductName)
	if p := attr(d, driver, contract.AttrProfile); p != "" {
		m = strings.TrimSpace(m + " " + p)
	}
	return m
}

// holdersByDevice maps driver/pool/device to the claims allocated it.
func holdersByDevice(claims []resourceapi.ResourceClaim) map[string][]string {
	out := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		var pods []string
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" {
				pods = append(pods, "pod "+c.Namespace+"/"+r.Name)
			}
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			h := "claim " + c.Namespace + "/" + c.Name
			if r.ShareID != nil {
				h += " (share" + consumed(r.ConsumedCapacity) + ")"
			}
			if len(pods) > 0 {
				h += " for " + strings.Join(pods, ", ")
			}
			k := r.Driver + "/" + r.Pool + "/" + r.Device
			out[k] = append(out[k], h)
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
// holder, then one per taint ("tainted key=value:effect"); a free device
// says "free".
func WriteDevices(w io.Writer, ds []Device) error {
	var b strings.Builder
	// Writes into a strings.Builder cannot fail.
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NODE\tNVLINK DOMAIN\tDEVICE\tTYPE\tMODEL\tHELD BY")
	for _, d := range ds {
		holders := slices.Clone(d.Holders)
		for _, t := range d.Taints {
			holders = append(holders, "tainted "+t)
		}
		if len(holders) == 0 {
			holders = []string{"free"}
		}
		for i, h := range holders {
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

// Nodes reads the cluster's slices and claims (list on both: the
// read-only role of manifests/kubectl) and writes the table.
func Nodes(ctx context.Context, client kubernetes.Interface, node string, w io.Writer) error {
	sl, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceClaims: %w", err)
	}
	ds := Devices(sl.Items, claims.Items, node)
	if len(ds) == 0 {
		if node != "" {
			return fmt.Errorf("node %s publishes no devices", node)
		}
		return fmt.Errorf("no ResourceSlices in the cluster: are the node agents running?")
	}
	return WriteDevices(w, ds)
}
