// Package partitionable scores nodes for how many large partitions of
// partitionable devices (MIG) stay placeable after the pod's allocation.
// It reads the allocation the GPUTopology plugin chose on each node, so it
// must run in the same profile.
package partitionable

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/plugins/nvlinktopo"
	"github.com/gputopo/gputopo/pkg/plugins/scoring"
)

// Name of the plugin in a KubeSchedulerConfiguration.
const Name = "GPUPartitionable"

// Plugin scores MIG placeability.
type Plugin struct{}

var (
	_ fwk.ScorePlugin     = &Plugin{}
	_ fwk.ScoreExtensions = &Plugin{}
)

// New takes no arguments; its weight is the profile's plugin weight.
func New(_ context.Context, _ runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	return &Plugin{}, nil
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return Name }

// Score rates the node by the MIG placeability the allocation keeps.
func (p *Plugin) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	q, ok := nvlinktopo.NodeQuality(cs, nodeInfo.Node().Name)
	if !ok {
		return 0, nil
	}
	return scoring.ToScore(q.MIGScore()), nil
}

// ScoreExtensions normalizes scores.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore maps ratings onto 0..100.
func (p *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	scoring.MinMax(scores)
	return nil
}
