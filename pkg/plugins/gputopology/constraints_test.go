package gputopology

import (
	"math"
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
	adm := p.admissionFor(where)
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
	if again := p.admissionFor(where); again != adm {
		t.Error("the same learner build got a new admission: its per-node results are lost")
	}
	// The node's result is kept for that node object only.
	relabeled := st.MakeNode().Name("t4").Label("gpu-model", "V100").Obj()
	if got := adm.excluded(relabeled); math.Abs(got-0.3) > 1e-9 {
		t.Errorf("node t4 relabeled V100: excluded %v, want 0.3 (its old result must not be reused)", got)
	}
	if got := p.admissionFor([]topology.Placement{{Key: "forgotten", Share: 1}}); got != nil {
		t.Errorf("no constrained placement: admission %+v, want nil (nothing excluded anywhere)", got)
	}
	var none *admission
	if got := none.excluded(tests[0].node); got != 0 {
		t.Errorf("nil admission: excluded %v, want 0", got)
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
	p.admissionFor(nil)
	if n := len(p.byKey); n != 0 {
		t.Errorf("after a workload using none of them, %d placements kept, want 0", n)
	}
}
