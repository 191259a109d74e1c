// Package partitionable scores nodes for how many large partitions of
// partitionable devices (MIG) stay placeable after the pod's allocation.
// It reads the allocation the GPUTopology plugin chose on each node, so it
// must run in the same profile.
package partitionable

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/plugins/normalize"
)

// Name of the plugin in a KubeSchedulerConfiguration.
const Name = "GPUPartitionable"

// New takes no arguments and no feature gates (it reads only what
// GPUTopology chose); its weight is the profile's plugin weight.
func New(_ context.Context, _ runtime.Object, _ fwk.Handle, _ plfeature.Features) (fwk.Plugin, error) {
	return gputopology.NewQualityScorer(Name, allocator.Quality.MIGScore, normalize.MinMax, false), nil
}
