package gputopology

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gputopo/gputopo/pkg/topology"
)

func TestPlacementKey(t *testing.T) {
	plain := st.MakePod().Name("p").Obj()
	selected := st.MakePod().Name("p").NodeSelector(map[string]string{"b": "2", "a": "1"}).Obj()
	sameSelected := st.MakePod().Name("q").NodeSelector(map[string]string{"a": "1", "b": "2"}).Obj()
	t4 := st.MakePod().Name("p").NodeAffinityIn("gpu-model", []string{"T4"}, st.NodeSelectorTypeMatchExpressions).Obj()
	v100 := st.MakePod().Name("p").NodeAffinityIn("gpu-model", []string{"V100"}, st.NodeSelectorTypeMatchExpressions).Obj()
	preferredOnly := st.MakePod().Name("p").Obj()
	preferredOnly.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 1}}}}

	if k := placementKey(plain); k != "" {
		t.Errorf("pod without constraints: key %q, want empty", k)
	}
	if k := placementKey(preferredOnly); k != "" {
		t.Errorf("preferred affinity only: key %q, want empty (it does not restrict placement)", k)
	}
	if placementKey(selected) != placementKey(sameSelected) {
		t.Errorf("equal nodeSelectors in another order got different keys: %q, %q", placementKey(selected), placementKey(sameSelected))
	}
	reordered := st.MakePod().Name("p").NodeAffinityIn("gpu-model", []string{"V100", "A10"}, st.NodeSelectorTypeMatchExpressions).Obj()
	ordered := st.MakePod().Name("p").NodeAffinityIn("gpu-model", []string{"A10", "V100"}, st.NodeSelectorTypeMatchExpressions).Obj()
	if placementKey(reordered) != placementKey(ordered) {
		t.Errorf("the same values in another order got different keys: %q, %q", placementKey(reordered), placementKey(ordered))
	}
	if placementKey(t4) == placementKey(v100) || placementKey(t4) == "" {
		t.Errorf("different required affinities must have different, non-empty keys: %q, %q", placementKey(t4), placementKey(v100))
	}
}

func TestAdmission(t *testing.T) {
	var p placements
	t4Pod := st.MakePod().Name("a").NodeAffinityIn("gpu-model", []string{"T4"}, st.NodeSelectorTypeMatchExpressions).Obj()
	v100Pod := st.MakePod().Name("b").NodeAffinityIn("gpu-model", []string{"V100", "A10"}, st.NodeSelectorTypeMatchExpressions).Obj()
	t4Key, v100Key := p.remember(t4Pod), p.remember(v100Pod)
	where := []topology.Placement{
		{Key: t4Key, Share: 0.3},       // T4 only
		{Key: v100Key, Share: 0.2},     // V100 or A10
		{Key: "forgotten", Share: 0.1}, // not remembered: excludes nothing
	}
	adm, err := p.admissionFor(where, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		node *v1.Node
		want float64
	}{
		{st.MakeNode().Name("t4").Label("gpu-model", "T4").Obj(), 0.2},
		{st.MakeNode().Name("a10").Label("gpu-model", "A10").Obj(), 0.3},
		{st.MakeNode().Name("none").Obj(), 0.5},
	}
	for _, tc := range tests {
		if got := adm.excluded(tc.node); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("node %s: excluded %v, want %v", tc.node.Name, got, tc.want)
		}
	}
	if again, _ := p.admissionFor(where, nil); again != adm {
		t.Error("the same learner build got a new admission: its per-node results are lost")
	}
	// The node's result is kept for that node object only.
	relabeled := st.MakeNode().Name("t4").Label("gpu-model", "V100").Obj()
	if got := adm.excluded(relabeled); math.Abs(got-0.3) > 1e-9 {
		t.Errorf("node t4 relabeled V100: excluded %v, want 0.3 (its old result must not be reused)", got)
	}
	if got, _ := p.admissionFor([]topology.Placement{{Key: "forgotten", Share: 1}}, nil); got != nil {
		t.Errorf("no constrained placement: admission %+v, want nil (nothing excluded anywhere)", got)
	}
	var none *admission
	if got := none.excluded(tests[0].node); got != 0 {
		t.Errorf("nil admission: excluded %v, want 0", got)
	}
}

// TestAdmissionKeepsNoNodeAlive: an admission lasts until the learner's
// next build, and nodes come and go meanwhile (an autoscaler names each
// anew): it must not keep the Node objects it measured, nor a name for
// every node ever measured.
func TestAdmissionKeepsNoNodeAlive(t *testing.T) {
	var p placements
	pinned := p.remember(st.MakePod().Name("a").NodeSelector(map[string]string{"pool": "h100"}).Obj())
	adm, err := p.admissionFor([]topology.Placement{{Key: pinned, Share: 0.5}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	measure := func(from, to int) {
		for i := from; i < to; i++ {
			adm.excluded(st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Label("pool", "h100").Obj())
		}
	}
	measure(0, 100)
	runtime.GC()
	runtime.GC()
	alive := 0
	adm.perNode.Range(func(_, v any) bool {
		if v.(nodeExclusion).node.Value() != nil {
			alive++
		}
		return true
	})
	if alive > 0 {
		t.Errorf("%d of 100 nodes measured and dropped are still alive, kept by the admission", alive)
	}
	measure(100, 100+2*maxExclusions)
	names := 0
	adm.perNode.Range(func(_, _ any) bool { names++; return true })
	if names > maxExclusions {
		t.Errorf("%d node names remembered, want at most %d", names, maxExclusions)
	}
}

// TestPlacementsBounded: keys no class uses are forgotten once there are
// more than rememberedPlacements, so pods with unique constraints (pinned
// to one node each) cannot grow the plugin's memory without bound.
func TestPlacementsBounded(t *testing.T) {
	var p placements
	for i := range 3 * rememberedPlacements {
		p.remember(st.MakePod().Name("p").NodeSelector(map[string]string{"kubernetes.io/hostname": string(rune('a'+i%26)) + string(rune('0'+i))}).Obj())
	}
	_, _ = p.admissionFor(nil, nil)
	if n := len(p.byKey); n != 0 {
		t.Errorf("after a workload using none of them, %d placements kept, want 0", n)
	}
}

func TestAdmissionPressure(t *testing.T) {
	var p placements
	t4Key := p.remember(st.MakePod().Name("a").NodeAffinityIn("gpu-model", []string{"T4"}, st.NodeSelectorTypeMatchExpressions).Obj())
	v100Key := p.remember(st.MakePod().Name("b").NodeAffinityIn("gpu-model", []string{"V100", "A10"}, st.NodeSelectorTypeMatchExpressions).Obj())
	nodes := []*v1.Node{
		st.MakeNode().Name("t4").Label("gpu-model", "T4").Obj(),
		st.MakeNode().Name("a10").Label("gpu-model", "A10").Obj(),
		st.MakeNode().Name("v100").Label("gpu-model", "V100").Obj(),
		st.MakeNode().Name("cpu").Obj(),
	}
	gpus := map[string]*topology.NodeGPUs{"t4": {GPUs: 8, Free: 4}, "a10": {GPUs: 2, Free: 2}, "v100": {GPUs: 8, Free: 2}}
	adm, err := p.admissionFor([]topology.Placement{{Key: t4Key, Share: 0.3}, {Key: v100Key, Share: 0.2}},
		func() ([]*v1.Node, map[string]*topology.NodeGPUs, error) { return nodes, gpus, nil })
	if err != nil {
		t.Fatal(err)
	}
	// 8 GPUs free: T4-pinned requests, 30% of all, may use 4 of them
	// (pressure 0.6); V100-or-A10 ones, 20%, 4 (0.4).
	tests := []struct {
		node string
		own  string
		want float64
	}{
		{"t4", "", 0.6},
		{"t4", t4Key, 0},
		{"t4", v100Key, 0.6},
		{"a10", "", 0.4},
		{"v100", v100Key, 0},
		{"cpu", "", 0},
	}
	byName := map[string]*v1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, tc := range tests {
		if got := adm.contention(byName[tc.node], tc.own); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("node %s, own key %q: contention %v, want %v", tc.node, tc.own, got, tc.want)
		}
	}
	failing := func() ([]*v1.Node, map[string]*topology.NodeGPUs, error) { return nil, nil, errors.New("no nodes") }
	var q placements
	q.remember(st.MakePod().Name("a").NodeAffinityIn("gpu-model", []string{"T4"}, st.NodeSelectorTypeMatchExpressions).Obj())
	if _, err := q.admissionFor([]topology.Placement{{Key: t4Key, Share: 1}}, failing); err == nil {
		t.Error("the fleet could not be read: want an error")
	}
}
