package gputopology

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/plugins/normalize"
)

// topologyScorer rates nodes by link quality: best worst-pair class
// first, then least damage to free NVLink groups.
var topologyScorer = NewQualityScorer(Name, allocator.Quality.TopologyScore, normalize.FromBest, false)

// PreScore skips pods without claims: see QualityScorer.PreScore.
func (pl *GPUTopology) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	return topologyScorer.PreScore(ctx, cs, pod, nodes)
}

// Score rates the node by the link quality of the allocation Filter chose
// there.
func (pl *GPUTopology) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	return topologyScorer.Score(ctx, cs, pod, nodeInfo)
}

// ScoreExtensions normalizes scores to the framework's range.
func (pl *GPUTopology) ScoreExtensions() fwk.ScoreExtensions { return topologyScorer }
