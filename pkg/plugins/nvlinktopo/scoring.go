package nvlinktopo

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/plugins/scoring"
)

// Score rates the node by the link quality of the allocation Filter chose
// there: best worst-pair class first, then least damage to free NVLink
// groups.
func (pl *GPUTopology) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	q, ok := NodeQuality(cs, nodeInfo.Node().Name)
	if !ok {
		return 0, nil
	}
	return scoring.ToScore(q.TopologyScore()), nil
}

// ScoreExtensions normalizes scores to the framework's range.
func (pl *GPUTopology) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps the node ratings onto 0..100.
func (pl *GPUTopology) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	scoring.MinMax(scores)
	return nil
}
