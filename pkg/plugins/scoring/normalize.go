// Package scoring holds what gputopo's score plugins share: turning raw
// per-node ratings into the framework's 0..100 range.
package scoring

import (
	"math"

	fwk "k8s.io/kube-scheduler/framework"
)

// Scale is the factor between raw ratings and framework scores: raw
// ratings are kept with two decimals.
const Scale = 100

// ToScore turns a raw rating into a framework score before normalization.
func ToScore(raw float64) int64 { return int64(math.Round(raw * Scale)) }

// MinMax maps the scores linearly onto [MinNodeScore, MaxNodeScore], the
// best node getting the maximum. All equal scores become the maximum, so
// a plugin that cannot tell nodes apart does not bias the choice.
func MinMax(scores fwk.NodeScoreList) {
	if len(scores) == 0 {
		return
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = fwk.MaxNodeScore
			continue
		}
		scores[i].Score = fwk.MinNodeScore + (scores[i].Score-lo)*(fwk.MaxNodeScore-fwk.MinNodeScore)/(hi-lo)
	}
}
