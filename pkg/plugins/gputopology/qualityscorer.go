package gputopology

import (
	"context"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/plugins/normalize"
)

// QualityScorer is a Score plugin that rates each node by one aspect of
// the allocation GPUTopology chose there; the partitionable and
// consumable plugins are QualityScorers.
type QualityScorer struct {
	name      string
	rate      func(allocator.Quality) float64
	normalize func(fwk.NodeScoreList)
	// ratesMeasurements: rate tells nodes apart for a pod without claims,
	// which is only measured (Packing's growth of fragmentation).
	ratesMeasurements bool
}

var (
	_ fwk.PreScorePlugin  = &QualityScorer{}
	_ fwk.ScorePlugin     = &QualityScorer{}
	_ fwk.ScoreExtensions = &QualityScorer{}
	_ fwk.SignPlugin      = &QualityScorer{}
)

// NewQualityScorer returns a scorer named name that rates by rate and
// maps the ratings onto the framework's range with normalize
// (normalize.MinMax, FromBest or Clamp). Unless ratesMeasurements, pods
// without claims skip it: a measurement takes no device, so such a
// rating (link quality, MIG room) is the same on every node.
func NewQualityScorer(name string, rate func(allocator.Quality) float64, normalize func(fwk.NodeScoreList), ratesMeasurements bool) *QualityScorer {
	return &QualityScorer{name: name, rate: rate, normalize: normalize, ratesMeasurements: ratesMeasurements}
}

// Name returns the plugin's name.
func (s *QualityScorer) Name() string { return s.name }

// PreScore skips pods without claims (nor DRA extended resources) unless
// the rating reads their measurement: every node would rate the same, and
// the skip saves a state lookup per node.
func (s *QualityScorer) PreScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if s.ratesMeasurements {
		return nil
	}
	if st, err := getState(cs); err == nil && len(st.claims) == 0 && st.ext == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// unmeasured is the raw score of a node where the pod needed no
// allocation: its extended resources are served there by a device plugin.
// No rating can be negative enough to be mistaken for it.
const unmeasured = math.MinInt64

// Score rates the node by the allocation Filter chose there.
func (s *QualityScorer) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	q, ok := NodeQuality(cs, nodeInfo.Node().Name)
	if !ok {
		return unmeasured, nil
	}
	return normalize.ToScore(s.rate(q)), nil
}

// ScoreExtensions normalizes scores.
func (s *QualityScorer) ScoreExtensions() fwk.ScoreExtensions { return s }

// NormalizeScore maps the ratings onto 0..100, best node highest. Nodes
// where nothing was allocated get the mean of the others: a pod that
// asks for nvidia.com/gpu lands on a device-plugin node or a DRA node as
// the other plugins (affinity, spreading) decide, and among DRA nodes
// this rating still picks the best.
func (s *QualityScorer) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if !slices.ContainsFunc(scores, func(n fwk.NodeScore) bool { return n.Score == unmeasured }) {
		s.normalize(scores)
		return nil
	}
	measured := make(fwk.NodeScoreList, 0, len(scores))
	for _, n := range scores {
		if n.Score != unmeasured {
			measured = append(measured, n)
		}
	}
	s.normalize(measured)
	var neutral int64
	for _, n := range measured {
		neutral += n.Score
	}
	if len(measured) > 0 {
		neutral /= int64(len(measured))
	}
	next := 0
	for i := range scores {
		if scores[i].Score == unmeasured {
			scores[i].Score = neutral
			continue
		}
		scores[i].Score = measured[next].Score
		next++
	}
	return nil
}
