// Package gputopology is gputopo's main scheduler plugin. It allocates a
// pod's ResourceClaims with the gputopo engine (upstream's semantics, the
// best devices instead of the first), on the scheduler's shared DRA state:
// claims, in-flight allocations, slices and classes come from
// fwk.Handle.SharedDRAManager(), so that the in-tree DynamicResources
// plugin of another profile in the same binary and this one never hand out
// the same device.
//
// The profile that enables it must disable DynamicResources: this plugin
// owns every claim of the pods it schedules. Its Score prefers nodes that
// offer the best NVLink locality; the partitionable and consumable
// plugins score MIG placeability and GPU fragmentation from the same
// per-node results.
package gputopology

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/apis/config"
	v1 "github.com/gputopo/gputopo/pkg/apis/config/v1"
	"github.com/gputopo/gputopo/pkg/apis/config/validation"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Name of the plugin in a KubeSchedulerConfiguration.
const Name = "GPUTopology"

// GPUTopology allocates DRA claims topology-aware.
type GPUTopology struct {
	args       *config.GPUTopologyArgs
	engine     *allocator.Engine
	fts        plfeature.Features
	features   allocator.Features
	fh         fwk.Handle
	clientset  kubernetes.Interface
	draManager fwk.SharedDRAManager

	// learner estimates the workload Packing measures against from the
	// requests this profile places (nil with packing off).
	learner *topology.Learner
	// placements of the learned classes (where their pods may run).
	placements placements
	// learnedPods: the pods the learner counted, each once.
	learnedPods learnedPods

	invMu sync.Mutex
	inv   *allocator.Inventory
	// fleetIndexes is the newest inventory's for fleetGPUs.
	fleetIndexes fleetIndexes
}

// The configured workload counts as learnerPrior placed requests; at
// most learnerClasses classes (and as many placements) are kept:
// Fragmentation's cost is linear in them and it runs for every node of
// every pod (about 4% of a replay's CPU at 96), while the openb traces'
// requests fall in 119-415 classes, of which 32 covered only 67-90%.
const (
	learnerPrior   = 200
	learnerClasses = 96
)

var (
	_ fwk.PreEnqueuePlugin  = &GPUTopology{}
	_ fwk.PreFilterPlugin   = &GPUTopology{}
	_ fwk.FilterPlugin      = &GPUTopology{}
	_ fwk.PostFilterPlugin  = &GPUTopology{}
	_ fwk.PreScorePlugin    = &GPUTopology{}
	_ fwk.ScorePlugin       = &GPUTopology{}
	_ fwk.ReservePlugin     = &GPUTopology{}
	_ fwk.PreBindPlugin     = &GPUTopology{}
	_ fwk.EnqueueExtensions = &GPUTopology{}
	_ fwk.SignPlugin        = &GPUTopology{}
)

// New builds the plugin from its arguments and the scheduler's feature
// gates (through frameworkruntime.FactoryAdapter, as in-tree plugins
// are). Invalid arguments are an error naming the field, and so are gates
// the engine does not implement: either stops the scheduler at start.
func New(ctx context.Context, obj runtime.Object, fh fwk.Handle, fts plfeature.Features) (fwk.Plugin, error) {
	args, err := v1.Decode(obj)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	if err := validation.ValidateGPUTopologyArgs(field.NewPath("pluginConfig", Name, "args"), args); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	features := allocatorFeatures(fts)
	if err := unsupportedGates(fts); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	if fh.SharedDRAManager() == nil {
		return nil, fmt.Errorf("plugin %s: the scheduler has no DRA manager: enable the DynamicResourceAllocation feature gate", Name)
	}
	if !fts.EnableDRASchedulerFilterTimeout && args.FilterTimeout.Duration > 0 {
		// As in-tree, the timeout is part of that gate; said, since the
		// shipped configuration sets it and in-tree would refuse it.
		klog.FromContext(ctx).Info("filterTimeout not applied: the DRASchedulerFilterTimeout feature gate is off", "profile", fh.ProfileName(), "filterTimeout", args.FilterTimeout.Duration)
		args.FilterTimeout.Duration = 0
	}
	engine, err := allocator.New(allocator.Options{
		Features: features,
		Policy:   args.Policy(),
		CELCache: cel.NewCache(1024, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity}),
	})
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", Name, err)
	}
	registerMetrics()
	fleetMetrics.setSource(fh.SharedDRAManager(), nodeLister(fh), features.DeviceTaints)
	var learner *topology.Learner
	if args.Packing.Enabled {
		learner = topology.NewLearner(args.Workload, learnerPrior, learnerClasses)
	}
	klog.FromContext(ctx).V(2).Info("GPUTopology plugin ready", "profile", fh.ProfileName(), "policy", klog.Format(args))
	pl := &GPUTopology{
		args: args, engine: engine, fts: fts, features: features, fh: fh,
		clientset: fh.ClientSet(), draManager: fh.SharedDRAManager(), learner: learner,
	}
	// For GPUCliquePlacement in this profile (BindingUnusable).
	bindingRules.Store(fh.ProfileName(), pl.bindingRule())
	return pl, nil
}

// Name returns the plugin's name.
func (pl *GPUTopology) Name() string { return Name }

// nodeLister is the scheduler's node lister; nil in a framework built
// without informers.
func nodeLister(fh fwk.Handle) corelisters.NodeLister {
	if f := fh.SharedInformerFactory(); f != nil {
		return f.Core().V1().Nodes().Lister()
	}
	return nil
}

// newSession is the engine's session for the pod's claims on the current
// slices and the cycle's allocated state, measuring fragmentation against
// the learned workload, and which of its classes may run where (nil: all
// anywhere).
func (pl *GPUTopology) newSession(state *allocator.AllocatedState, claims []*resourceapi.ResourceClaim) (*allocator.Session, *admission, error) {
	inv, err := pl.inventory()
	if err != nil {
		return nil, nil, err
	}
	return pl.newSessionOn(inv, state, claims)
}

// newSessionOn is newSession on the inventory inv.
func (pl *GPUTopology) newSessionOn(inv *allocator.Inventory, state *allocator.AllocatedState, claims []*resourceapi.ResourceClaim) (*allocator.Session, *admission, error) {
	s := pl.engine.NewSession(inv, pl.draManager.DeviceClasses(), state, claims)
	var adm *admission
	if pl.learner != nil {
		w, where := pl.learner.Estimate()
		s.WithWorkload(w)
		var err error
		if adm, err = pl.placements.admissionFor(where, pl.fleetGPUs(inv, state)); err != nil {
			return nil, nil, err
		}
	}
	return s, adm, nil
}

// inventory returns an Inventory for the current slices, reusing the last
// one when no slice changed and carrying cached selector results over
// when some did.
func (pl *GPUTopology) inventory() (*allocator.Inventory, error) {
	all, err := pl.draManager.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	slices := pl.ownSlices(all)
	pl.invMu.Lock()
	defer pl.invMu.Unlock()
	if pl.inv == nil {
		pl.inv = allocator.NewInventory(slices, pl.features)
	} else {
		pl.inv = pl.inv.Refresh(slices)
	}
	return pl.inv, nil
}

// allocatedState reads the ledger (allocated claims plus in-flight
// allocations).
func (pl *GPUTopology) allocatedState(ctx context.Context) (*allocator.AllocatedState, error) {
	return GatherAllocatedState(ctx, pl.draManager, pl.features.ConsumableCapacity)
}

// GatherAllocatedState reads the scheduler's shared ledger of allocated
// and in-flight devices, retrying for up to 5s while the claim tracker
// reports a concurrent change (it does whenever a claim changes during
// the read), so that a busy cluster does not fail a scheduling cycle.
// Without withShares (the DRAConsumableCapacity gate) it reads only the
// allocated devices, as the in-tree plugin does: the tracker then records
// every share as a whole device, and its full state would also copy the
// consumed capacity of every shared device in the cluster.
func GatherAllocatedState(ctx context.Context, m fwk.SharedDRAManager, withShares bool) (*allocator.AllocatedState, error) {
	gather := m.ResourceClaims().GatherAllocatedState
	if !withShares {
		gather = func() (*allocator.AllocatedState, error) {
			devices, err := m.ResourceClaims().ListAllAllocatedDevices()
			if err != nil {
				return nil, err
			}
			return &allocator.AllocatedState{AllocatedDevices: devices}, nil
		}
	}
	var lastErr error
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s, err := gather()
		if err == nil && s != nil {
			return s, nil
		}
		if err == nil {
			err = errors.New("nil allocated state")
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil, fmt.Errorf("gather allocation state: %w", lastErr)
}
