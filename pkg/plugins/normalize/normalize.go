// Package normalize holds what gputopo's score plugins share: turning raw
// per-node ratings into the framework's 0..100 range.
package normalize

import (
	"math"

	fwk "k8s.io/kube-scheduler/framework"
)

// Scale is the factor between raw ratings and framework scores: raw
// ratings are kept with two decimals.
const Scale = 100

// ToScore turns a raw rating into a framework score before normalization.
func ToScore(raw float64) int64 { return int64(math.Round(raw * Scale)) }

// MinMax maps the scores linearly onto [MinScore, MaxScore], the
// best node getting the maximum. All equal scores become the maximum, so
// a plugin that cannot tell nodes apart does not bias the choice.
func MinMax(scores fwk.NodeScoreList) {
	if len(scores) == 0 {
		return
	}
	lo, hi := bounds(scores)
	for i := range scores {
		if hi == lo {
			scores[i].Score = fwk.MaxScore
			continue
		}
		scores[i].Score = fwk.MinScore + (scores[i].Score-lo)*(fwk.MaxScore-fwk.MinScore)/(hi-lo)
	}
}

// Clamp takes raw ratings that are already on the framework's scale
// (ToScore of a value meant as 0..100) and clamps them into it, keeping
// their absolute differences: for criteria whose small differences must
// stay small next to other plugins' scores.
func Clamp(scores fwk.NodeScoreList) {
	for i := range scores {
		s := scores[i].Score / Scale
		scores[i].Score = min(max(s, fwk.MinScore), fwk.MaxScore)
	}
}

// FromBest gives the best node the maximum and every other node the
// maximum less its raw shortfall, in rating points; the shortfalls are
// compressed only when they spread over more than the framework's range.
// Unlike MinMax, nodes that differ by a fraction of a point stay within a
// fraction of a point of each other, so a criterion that barely tells
// nodes apart does not override the other plugins (on a fleet without
// NVLink, MinMax turned a 0.02 difference in intact free GPUs into the
// whole score), while a large difference (a link class, a firstAvailable
// fallback) still decides.
func FromBest(scores fwk.NodeScoreList) {
	if len(scores) == 0 {
		return
	}
	lo, hi := bounds(scores)
	span := max(hi-lo, (fwk.MaxScore-fwk.MinScore)*Scale)
	for i := range scores {
		scores[i].Score = fwk.MaxScore - (hi-scores[i].Score)*(fwk.MaxScore-fwk.MinScore)/span
	}
}

// bounds is the lowest and highest score of a non-empty list.
func bounds(scores fwk.NodeScoreList) (lo, hi int64) {
	lo, hi = scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	return lo, hi
}
