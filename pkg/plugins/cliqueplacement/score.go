package cliqueplacement

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
)

// linkStepsPerGPU: a free GPU left behind in a broken clique weighs as
// much as this many link-class steps below the best of the group's
// claims, so that fit decides and links break ties.
const linkStepsPerGPU = 16

// ScorePlacement rates a feasible placement: the fewer of its clique's
// free GPUs the group leaves behind, the better (whole cliques stay free
// for the groups that need them); then the fewer link-class steps its
// multi-GPU claims lost against the best their nodes offered. Raw scores
// are at most 0; NormalizePlacementScore maps them onto [0, MaxScore].
func (pl *CliquePlacement) ScorePlacement(_ context.Context, state fwk.PlacementCycleState, pg fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	free, ok := freeBefore(state, a.Placement)
	if !ok {
		return 0, nil // not one of ours (the parent placement)
	}
	used, steps := 0, 0
	for _, pa := range a.ProposedAssignments {
		if q, ok := gputopology.NodeQuality(pa.GetCycleState(), pa.GetNodeName()); ok {
			used += q.Request.GPUs
			steps += q.LinkSteps
			continue
		}
		used += pl.podGPUs(pa.GetPod())
	}
	left := max(free-used, 0)
	return -int64(left*linkStepsPerGPU + steps), nil
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
