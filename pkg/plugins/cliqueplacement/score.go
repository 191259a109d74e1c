package cliqueplacement

import (
	"context"
	"math"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
)

// The raw score is a penalty in tenths of link-class steps. A free GPU
// left behind in a broken clique weighs as much as linkStepsPerGPU steps
// below the best links of the group's claims, so that fit decides and
// links break ties; a GPU's worth of fragmentation of shared GPUs or of
// MIG placeability lost weighs fragmentationSteps.
const (
	linkStepsPerGPU    = 16
	fragmentationSteps = 4
	// migGPU is a whole A100/H100's MIG placeability (7g: 7 squared).
	migGPU = 49
)

// ScorePlacement rates a feasible placement: the fewer of its clique's
// free GPUs the group leaves behind, the better (whole cliques stay free
// for the groups that need them); then the fewer link-class steps its
// multi-GPU claims lost against the best their nodes offered, and the
// less its shares and MIG partitions fragmented their GPUs. Raw scores
// are at most 0; NormalizePlacementScore maps them onto [0, MaxScore].
func (pl *CliquePlacement) ScorePlacement(_ context.Context, state fwk.PlacementCycleState, pg fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	free, ok := freeBefore(state, a.Placement)
	if !ok {
		return 0, nil // not one of ours (the parent placement)
	}
	used, penalty := 0, 0.0
	for _, pa := range a.ProposedAssignments {
		q, ok := gputopology.NodeQuality(pa.GetCycleState(), pa.GetNodeName())
		if !ok {
			used += pl.podGPUs(pa.GetPod(), nil)
			continue
		}
		used += q.Request.GPUs
		penalty += float64(q.LinkSteps)
		penalty += fragmentationSteps * max(q.Fragmentation-q.FragmentationBefore, 0)
		penalty += fragmentationSteps * max(q.MIGPlaceableBefore-q.MIGPlaceable, 0) / migGPU
	}
	penalty += float64(linkStepsPerGPU * max(free-used, 0))
	return -int64(math.Round(10 * penalty)), nil
}

func freeBefore(state fwk.PlacementCycleState, p *fwk.Placement) (int, bool) {
	if state == nil || p == nil {
		return 0, false
	}
	pgState := state.GetPodGroupSchedulingCycle()
	if pgState == nil {
		return 0, false
	}
	v, err := pgState.Read(stateKey)
	if err != nil {
		return 0, false
	}
	g, ok := v.(*generated)
	if !ok {
		return 0, false
	}
	free, ok := g.free[p.Name]
	return free, ok
}

// PlacementScoreExtensions returns the plugin: it normalizes its scores.
func (pl *CliquePlacement) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return pl }

// NormalizePlacementScore maps the raw scores linearly onto [MinScore,
// MaxScore], best onto MaxScore; equal scores all get MaxScore.
func (pl *CliquePlacement) NormalizePlacementScore(_ context.Context, _ fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = fwk.MaxScore
			continue
		}
		scores[i].Score = fwk.MinScore + (scores[i].Score-lo)*(fwk.MaxScore-fwk.MinScore)/(hi-lo)
	}
	return nil
}
