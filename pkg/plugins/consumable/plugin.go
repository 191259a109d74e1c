// Package consumable scores nodes for how little the allocation grows the
// expected fragmentation of shared GPUs (consumable capacity, KEP-5075).
// It reads the allocation the GPUTopology plugin chose on each node, so it
// must run in the same profile.
package consumable

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/plugins/nvlinktopo"
	"github.com/gputopo/gputopo/pkg/plugins/scoring"
)

// Name of the plugin in a KubeSchedulerConfiguration.
const Name = "GPUConsumable"

// Plugin scores shared-GPU packing.
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

// Score rates the node by the fragmentation the allocation adds.
func (p *Plugin) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	q, ok := nvlinktopo.NodeQuality(cs, nodeInfo.Node().Name)
	if !ok {
		return 0, nil
	}
	return scoring.ToScore(q.PackingScore()), nil
}

// ScoreExtensions normalizes scores.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore maps ratings onto 0..100.
func (p *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	scoring.MinMax(scores)
	return nil
}
