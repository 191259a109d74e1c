// Package cliqueplacement places pod groups (the Workload API's
// PodGroups, scheduling.k8s.io/v1beta1) in multi-node NVLink cliques, such
// as the racks of a GB200 NVL72. It is the profile's placement generator
// and one of its placement scorers:
//
//   - GeneratePlacements proposes, for a group whose topology constraint
//     names the clique label (contract.LabelClique), one placement per
//     clique read from the DRA state: the GPUs' cliqueID attribute in
//     ResourceSlices, the node label for drivers that publish only that.
//     A partly placed group is pinned to its clique; cliques without
//     enough free whole GPUs for the group are left out; the rest are
//     proposed best fit first, capped at maxPlacements. Any other
//     topology key is served from node labels, as the in-tree
//     TopologyPlacementGenerator serves it.
//   - ScorePlacement prefers the placement that leaves the fewest free
//     GPUs behind in its clique (whole cliques stay free for the groups
//     that need them), then the one whose claims got the best links.
//
// Devices are still allocated by GPUTopology, pod by pod, within the
// placement the framework tries.
package cliqueplacement

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/gputopo/gputopo/pkg/apis/config"
	v1 "github.com/gputopo/gputopo/pkg/apis/config/v1"
	"github.com/gputopo/gputopo/pkg/apis/config/validation"
)

// Name of the plugin in a KubeSchedulerConfiguration.
const Name = "GPUCliquePlacement"

// CliquePlacement generates and scores clique placements for pod groups.
type CliquePlacement struct {
	args       *config.GPUCliquePlacementArgs
	fh         fwk.Handle
	profile    string // the profile's name, which GPUTopology's binding rule goes by
	draManager fwk.SharedDRAManager
	fts        plfeature.Features
	gpuClasses map[string]bool
	// celCache compiles the selectors of the classes of the pods' other
	// node-local devices (localdevices.go).
	celCache *cel.Cache
}

var (
	_ fwk.PlacementGeneratePlugin  = &CliquePlacement{}
	_ fwk.PlacementScorePlugin     = &CliquePlacement{}
	_ fwk.PlacementScoreExtensions = &CliquePlacement{}
)

// New builds the plugin. The framework calls placement plugins only with
// the gates GenericWorkload and TopologyAwareWorkloadScheduling on (both
// off by default in 1.37); without them the plugin stays in the profile
// and does nothing, so that one configuration serves clusters with and
// without pod groups.
func New(ctx context.Context, obj runtime.Object, fh fwk.Handle, fts plfeature.Features) (fwk.Plugin, error) {
	args, err := v1.DecodeCliquePlacement(obj)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	if err := validation.ValidateGPUCliquePlacementArgs(field.NewPath("pluginConfig", Name, "args"), args); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	logger := klog.FromContext(ctx)
	if !fts.EnableGenericWorkload || !fts.EnableTopologyAwareWorkloadScheduling {
		logger.V(2).Info("GPUCliquePlacement is idle: the scheduler places pod groups only with the feature gates GenericWorkload and TopologyAwareWorkloadScheduling on", "profile", fh.ProfileName())
	}
	if fh.SharedDRAManager() == nil {
		return nil, fmt.Errorf("plugin %s: the scheduler has no DRA manager: enable the DynamicResourceAllocation feature gate", Name)
	}
	classes := map[string]bool{}
	for _, c := range args.GPUClasses {
		classes[c] = true
	}
	logger.V(2).Info("GPUCliquePlacement plugin ready", "profile", fh.ProfileName(), "args", klog.Format(args))
	return &CliquePlacement{args: args, fh: fh, profile: fh.ProfileName(), draManager: fh.SharedDRAManager(), fts: fts, gpuClasses: classes,
		celCache: cel.NewCache(64, cel.Features{EnableConsumableCapacity: fts.EnableDRAConsumableCapacity})}, nil
}

// Name returns the plugin's name.
func (pl *CliquePlacement) Name() string { return Name }
