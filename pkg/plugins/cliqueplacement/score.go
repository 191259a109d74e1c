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

// unplacedPodSteps is the penalty of each of the group's pods a
// placement leaves unplaced: more than every other penalty together (a
// clique's free GPUs left behind, link steps, fragmentation), so that a
// placement that runs more of the group always wins. A gang trial
// succeeds once minCount pods fit, and the pods left over are then held
// to the chosen clique: the tightest clique that fits only minCount must
// not beat one that fits the whole group (upstream's PodGroupPodsCount
// ranks by pods placed too, at weight 1 against this plugin's 10).
const unplacedPodSteps = 1e6

// ScorePlacement rates a feasible placement: the more of the group's
// pods it places, the better; then the fewer of its clique's free GPUs
// the group leaves behind (whole cliques stay free for the groups that
// need them); then the fewer link-class steps its multi-GPU claims lost
// against the best their nodes offered, and the less its shares and MIG
// partitions fragmented their GPUs. Raw scores are at most 0;
// NormalizePlacementScore maps them onto [0, MaxScore].
func (pl *CliquePlacement) ScorePlacement(_ context.Context, state fwk.PlacementCycleState, pg fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	free, ok := freeBefore(state, a.Placement)
	if !ok {
		return 0, nil // not one of ours (the parent placement)
	}
	used, penalty := 0, 0.0
	for _, pa := range a.ProposedAssignments {
		q, ok := gputopology.NodeQuality(pa.GetCycleState(), pa.GetNodeName())
		if !ok {
			used += pl.podGPUs(pa.GetPod(), nil, nil)
			continue
		}
		used += q.Request.GPUs
		penalty += float64(q.LinkSteps)
		penalty += fragmentationSteps * max(q.Fragmentation-q.FragmentationBefore, 0)
		penalty += fragmentationSteps * max(q.MIGPlaceableBefore-q.MIGPlaceable, 0) / migGPU
	}
	penalty += float64(linkStepsPerGPU * max(free-used, 0))
	unplaced := max(len(pg.GetUnscheduledPods())-len(a.ProposedAssignments), 0)
	return rawScore(unplaced, penalty), nil
}

// rawScore is the placement's score in tenths of steps, at most 0. The
// other penalties are capped below one unplaced pod's.
func rawScore(unplaced int, penalty float64) int64 {
	return -int64(math.Round(10 * (unplacedPodSteps*float64(unplaced) + min(penalty, unplacedPodSteps-1))))
}

// unplacedOf reads the number of unplaced pods back from a raw score.
func unplacedOf(raw int64) int64 { return -raw / (10 * unplacedPodSteps) }

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

// NormalizePlacementScore maps the raw scores of the placements that
// leave the fewest pods unplaced linearly onto [MinScore+1, MaxScore],
// best onto MaxScore (equal scores all get MaxScore), and gives those
// that leave more unplaced MinScore: they lose, and their huge penalty
// does not squeeze the others' differences away.
func (pl *CliquePlacement) NormalizePlacementScore(_ context.Context, _ fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	fewest := unplacedOf(scores[0].Score)
	for _, s := range scores {
		fewest = min(fewest, unplacedOf(s.Score))
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range scores {
		if unplacedOf(s.Score) == fewest {
			lo, hi = min(lo, s.Score), max(hi, s.Score)
		}
	}
	for i := range scores {
		switch {
		case unplacedOf(scores[i].Score) != fewest:
			scores[i].Score = fwk.MinScore
		case hi == lo:
			scores[i].Score = fwk.MaxScore
		default:
			scores[i].Score = fwk.MinScore + 1 + (scores[i].Score-lo)*(fwk.MaxScore-fwk.MinScore-1)/(hi-lo)
		}
	}
	return nil
}
