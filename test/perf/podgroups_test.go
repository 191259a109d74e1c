package perf

import (
	"slices"
	"strconv"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/gputopo/gputopo/pkg/contract"
)

// measureGroups rates NVL72Groups from the API server: groups served
// whole, in arrival order until the first that was not; the share of
// served groups within one clique; the whole-rack groups served and the
// cliques still entirely free at the end.
func measureGroups(tCtx ktesting.TContext) (map[string]float64, error) {
	groups, err := tCtx.Client().SchedulingV1beta1().PodGroups("test").List(tCtx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := tCtx.Client().CoreV1().Pods("test").List(tCtx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodes, err := tCtx.Client().CoreV1().Nodes().List(tCtx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	cliqueOf := map[string]string{}
	free := map[string]bool{}
	for _, n := range nodes.Items {
		if c := n.Labels[contract.LabelClique]; c != "" {
			cliqueOf[n.Name] = c
			free[c] = true
		}
	}
	nodesOf := map[string][]string{} // group -> nodes of its bound pods
	podsOf := map[string]int{}
	for _, p := range pods.Items {
		g := p.Labels["gputopo.io/group"]
		podsOf[g]++
		if p.Spec.NodeName != "" {
			nodesOf[g] = append(nodesOf[g], p.Spec.NodeName)
			delete(free, cliqueOf[p.Spec.NodeName])
		}
	}
	order := groups.Items
	seq := func(labels map[string]string) int { n, _ := strconv.Atoi(labels["gputopo.io/seq"]); return n }
	slices.SortFunc(order, func(a, b schedulingv1beta1.PodGroup) int { return seq(a.Labels) - seq(b.Labels) })
	var served, beforeRejection, oneClique, wholeRack int
	rejected := false
	for _, g := range order {
		want := 1
		if gang := g.Spec.SchedulingPolicy.Gang; gang != nil {
			want = int(gang.MinCount)
		}
		bound := nodesOf[g.Name]
		if len(bound) < want || len(bound) < podsOf[g.Name] {
			rejected = true
			continue
		}
		served++
		if !rejected {
			beforeRejection++
		}
		cliques := map[string]bool{}
		for _, n := range bound {
			cliques[cliqueOf[n]] = true
		}
		if len(cliques) == 1 {
			oneClique++
		}
		if want == 18 {
			wholeRack++
		}
	}
	m := map[string]float64{
		"groups":                        float64(len(order)),
		"groups-served":                 float64(served),
		"served-before-first-rejection": float64(beforeRejection),
		"whole-rack-groups-served":      float64(wholeRack),
		"whole-cliques-free":            float64(len(free)),
	}
	if served > 0 {
		m["served-in-one-clique-pct"] = 100 * float64(oneClique) / float64(served)
	}
	return m, nil
}
