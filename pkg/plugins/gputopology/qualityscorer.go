package gputopology

import (
	"context"

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

// Score rates the node; nodes where the pod needed no allocation get 0
// before normalization, which then treats all nodes alike.
func (s *QualityScorer) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	q, ok := NodeQuality(cs, nodeInfo.Node().Name)
	if !ok {
		return 0, nil
	}
	return normalize.ToScore(s.rate(q)), nil
}

// ScoreExtensions normalizes scores.
func (s *QualityScorer) ScoreExtensions() fwk.ScoreExtensions { return s }

// NormalizeScore maps the ratings onto 0..100, best node highest.
func (s *QualityScorer) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	s.normalize(scores)
	return nil
}
