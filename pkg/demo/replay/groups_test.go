package replay

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRackMap: each of the target's racks once, in clique order, its trays
// in index order with the group holding each at the end; pods that left
// free their trays, a pod of no group does not read as free, and the
// other copy's trays stay out.
func TestRackMap(t *testing.T) {
	traysOf := map[string][]string{}
	for _, cp := range []string{"gputopo", "intree"} {
		for r, rack := range []string{"rack-b", "rack-a"} {
			c := fmt.Sprintf("uuid-%s.%d", cp, 2-r) // rack-a has the smaller clique
			for i := range 11 {
				traysOf[c] = append(traysOf[c], fmt.Sprintf("%s-%s-%d", cp, rack, 10-i))
			}
		}
	}
	o := &Outcome{Target: Target{Name: "gputopo", Copy: "gputopo"}, Pods: []*PodRecord{
		{Name: "a-0", Group: "a", Node: "gputopo-rack-a-0", Bound: true},
		{Name: "a-1", Group: "a", Node: "gputopo-rack-a-10", Bound: true},
		{Name: "b-0", Group: "b", Node: "gputopo-rack-b-2", Bound: true, Left: true},
		{Name: "c-0", Group: "c", Node: "gputopo-rack-b-2", Bound: true},
		{Name: "solo", Node: "gputopo-rack-b-3", Bound: true},
		{Name: "d-0", Group: "d"}, // pending
		{Name: "x", Group: "x", Node: "intree-rack-a-1", Bound: true},
	}}
	m := rackMap(o, traysOf, nil)
	if m.Scheduler != "gputopo" || len(m.Racks) != 2 {
		t.Fatalf("map of %q with %d racks, want gputopo with 2", m.Scheduler, len(m.Racks))
	}
	want := map[string]string{"gputopo-rack-a-0": "a", "gputopo-rack-a-10": "a", "gputopo-rack-b-2": "c", "gputopo-rack-b-3": noGroup}
	for k, r := range m.Racks {
		name := []string{"rack-a", "rack-b"}[k]
		if r.Name != name || r.Clique != fmt.Sprintf("uuid-gputopo.%d", k+1) {
			t.Errorf("rack %d is %s in %s, want %s in uuid-gputopo.%d", k, r.Name, r.Clique, name, k+1)
		}
		var nodes []string
		for _, tr := range r.Trays {
			nodes = append(nodes, tr.Node)
			if tr.Group != want[tr.Node] {
				t.Errorf("%s held by %q, want %q", tr.Node, tr.Group, want[tr.Node])
			}
		}
		var order []string
		for i := range 11 {
			order = append(order, fmt.Sprintf("gputopo-%s-%d", name, i))
		}
		if !slices.Equal(nodes, order) {
			t.Errorf("%s trays %v, want %v", name, nodes, order)
		}
	}
}

// A group on nodes in no clique (DGX servers, say) is in as many NVLink
// domains as nodes, not in "1 clique", and there is no rack to draw.
func TestGroupTablesWithoutCliques(t *testing.T) {
	client := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-0"}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1"}},
	)
	w := Workload{Pods: []PodGroup{
		{Name: "spread", Count: 2, Group: &Gang{MinCount: 2}},
		{Name: "one", Count: 1, Group: &Gang{MinCount: 1}},
	}}
	o := &Outcome{Target: Target{Name: "gputopo", Copy: "gputopo"}, Pods: []*PodRecord{
		{Name: "spread-0", Group: "spread", Node: "dgx-0", Bound: true},
		{Name: "spread-1", Group: "spread", Node: "dgx-1", Bound: true},
		{Name: "one-0", Group: "one", Node: "dgx-1", Bound: true},
	}}
	tables, racks, figures, err := GroupTables(context.Background(), client, w, []*Outcome{o})
	if err != nil {
		t.Fatal(err)
	}
	if got := tables[0].Rows; !slices.Equal(got[0], []string{"spread", "2", "started, 2 cliques"}) || !slices.Equal(got[1], []string{"one", "1", "started, 1 clique"}) {
		t.Errorf("rows %v, want spread in 2 domains, one in 1", got)
	}
	if racks != nil {
		t.Errorf("racks %+v, want none: no node is in a clique", racks)
	}
	if inOne := figures[0][1]; inOne.Value != 1 || inOne.Unit != "of 2" {
		t.Errorf("%s: %v %s, want 1 of 2", inOne.Label, inOne.Value, inOne.Unit)
	}
}

// A rack is named as the fleet file names it (rack:), and two node groups
// in it keep their trays together.
func TestRackMapNamesTheFleetsRack(t *testing.T) {
	var trays []string
	rackName := map[string]string{}
	for i := range 3 {
		for _, g := range []string{"tray", "spare"} {
			n := fmt.Sprintf("gputopo-%s-%d", g, i)
			trays = append(trays, n)
			rackName[n] = "nvl72-a"
		}
	}
	o := &Outcome{Target: Target{Name: "gputopo", Copy: "gputopo"}}
	m := rackMap(o, map[string][]string{"uuid.1": trays}, rackName)
	if len(m.Racks) != 1 || m.Racks[0].Name != "nvl72-a" {
		t.Fatalf("racks %+v, want one named nvl72-a", m.Racks)
	}
	var got []string
	for _, tr := range m.Racks[0].Trays {
		got = append(got, tr.Node)
	}
	want := []string{"gputopo-spare-0", "gputopo-spare-1", "gputopo-spare-2", "gputopo-tray-0", "gputopo-tray-1", "gputopo-tray-2"}
	if !slices.Equal(got, want) {
		t.Errorf("trays %v, want %v", got, want)
	}
}
