package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/report"
)

// GroupTables are, for a workload with pod groups, what each scheduler
// did with every group (started whole or not, in how many cliques), each
// scheduler's racks with the group holding each tray at the end (the
// report draws them side by side), and figures for the scheduler cards.
// Cliques come from the nodes' clique label, which the demo's node agents
// write.
func GroupTables(ctx context.Context, client kubernetes.Interface, w Workload, outs []*Outcome) ([]report.Table, []report.RackMap, [][]report.Figure, error) {
	var nodes *v1.NodeList
	err := retryRead(func() (err error) {
		nodes, err = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	cliqueOf := map[string]string{}
	traysOf := map[string][]string{} // clique -> nodes
	rackName := map[string]string{}  // node -> its rack in the fleet file
	for _, n := range nodes.Items {
		if r := n.Labels[fleet.RackLabel]; r != "" {
			rackName[n.Name] = r
		}
		if c := n.Labels[contract.LabelClique]; c != "" {
			cliqueOf[n.Name] = c
			traysOf[c] = append(traysOf[c], n.Name)
		}
	}
	summary := report.Table{Caption: "Pod groups: started whole, and in how many NVLink cliques", Head: []string{"group", "pods"}}
	for _, o := range outs {
		summary.Head = append(summary.Head, o.Target.Name)
	}
	figures := make([][]report.Figure, len(outs))
	served := make([]int, len(outs))
	inOne := make([]int, len(outs))
	groups := 0
	for _, g := range w.Pods {
		if g.Group == nil {
			continue
		}
		groups++
		row := []string{g.Name, fmt.Sprint(g.Count)}
		for i, o := range outs {
			bound, cliques := 0, map[string]bool{}
			for _, p := range o.Pods {
				if p.Group == g.Name && p.Node != "" {
					bound++
					// A node in no clique is its own NVLink domain:
					// pods on two such nodes share no NVLink.
					c, ok := cliqueOf[p.Node]
					if !ok {
						c = "node " + p.Node
					}
					cliques[c] = true
				}
			}
			switch {
			case bound < g.Group.MinCount:
				row = append(row, "waited")
			case len(cliques) == 1:
				served[i]++
				inOne[i]++
				row = append(row, "started, 1 clique")
			default:
				served[i]++
				row = append(row, fmt.Sprintf("started, %d cliques", len(cliques)))
			}
		}
		summary.Rows = append(summary.Rows, row)
	}
	for i := range outs {
		figures[i] = []report.Figure{
			{Label: "pod groups started whole", Value: float64(served[i]), Unit: fmt.Sprintf("of %d", groups)},
			{Label: "started groups in one NVLink clique", Value: float64(inOne[i]), Unit: fmt.Sprintf("of %d", served[i])},
		}
	}
	if len(traysOf) == 0 {
		return []report.Table{summary}, nil, figures, nil // no rack to draw
	}
	racks := make([]report.RackMap, len(outs))
	for i, o := range outs {
		racks[i] = rackMap(o, traysOf, rackName)
	}
	return []report.Table{summary}, racks, figures, nil
}

// rackMap is the target's racks, each with its trays in order and the
// group whose pod holds each at the end ("" free). A tray held by a pod
// outside any group is marked "(no group)", so it does not read as free.
// A rack is named as the fleet file names it (rackName, by node), else
// after its first tray's node group.
func rackMap(o *Outcome, traysOf map[string][]string, rackName map[string]string) report.RackMap {
	holder := map[string]string{}
	for _, p := range o.Pods {
		if p.Node == "" || p.Left {
			continue
		}
		switch {
		case p.Group != "":
			holder[p.Node] = p.Group
		case holder[p.Node] == "":
			holder[p.Node] = noGroup
		}
	}
	m := report.RackMap{Scheduler: o.Target.Name}
	var cliques []string
	for c, trays := range traysOf {
		if slices.ContainsFunc(trays, func(n string) bool { return strings.HasPrefix(n, o.Target.Copy+"-") }) {
			cliques = append(cliques, c)
		}
	}
	slices.Sort(cliques)
	for _, c := range cliques {
		var trays []string
		for _, n := range traysOf[c] {
			if strings.HasPrefix(n, o.Target.Copy+"-") {
				trays = append(trays, n)
			}
		}
		slices.SortFunc(trays, byIndex)
		name := rackName[trays[0]]
		if name == "" {
			name = rackOf(o.Target.Copy, trays[0])
		}
		r := report.Rack{Name: name, Clique: c}
		for _, n := range trays {
			r.Trays = append(r.Trays, report.Tray{Node: n, Group: holder[n]})
		}
		m.Racks = append(m.Racks, r)
	}
	return m
}

// noGroup marks a tray held by a pod of no group.
const noGroup = "(no group)"

// byIndex orders node names by their node group (the name before the
// numeric suffix: two groups' trays in one rack do not interleave), then
// by the suffix (tray 2 before tray 10).
func byIndex(a, b string) int {
	split := func(s string) (string, int) {
		i := strings.LastIndex(s, "-")
		n, _ := strconv.Atoi(s[i+1:])
		return s[:max(i, 0)], n
	}
	ga, ia := split(a)
	gb, ib := split(b)
	return cmp.Or(strings.Compare(ga, gb), cmp.Compare(ia, ib), strings.Compare(a, b))
}

// rackOf is the fleet file's node name of a tray: <copy>-<name>-<i>.
func rackOf(copyName, node string) string {
	name := strings.TrimPrefix(node, copyName+"-")
	if i := strings.LastIndex(name, "-"); i > 0 {
		return name[:i]
	}
	return name
}
