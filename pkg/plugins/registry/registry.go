// Package registry lists gputopo's scheduler plugins for the
// kube-scheduler command, integration tests and benchmarks.
package registry

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/gputopo/gputopo/pkg/plugins/cliqueplacement"
	"github.com/gputopo/gputopo/pkg/plugins/consumable"
	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/plugins/partitionable"
)

// Registry returns gputopo's plugin factories by name.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		gputopology.Name:     withGates(gputopology.New),
		partitionable.Name:   withGates(partitionable.New),
		consumable.Name:      withGates(consumable.New),
		cliqueplacement.Name: withGates(cliqueplacement.New),
	}
}

// withGates builds a plugin through frameworkruntime.FactoryAdapter with
// the scheduler's feature gates, as kube-scheduler's in-tree registry
// does. The gates are read when the plugin is built, after the command
// line (--feature-gates) has been parsed, not when the registry is made.
func withGates[T fwk.Plugin](factory frameworkruntime.PluginFactoryWithFts[T]) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		return frameworkruntime.FactoryAdapter(fts, factory)(ctx, args, fh)
	}
}

// SchedulerOptions registers gputopo's plugins with the kube-scheduler
// command, next to every in-tree plugin.
func SchedulerOptions() []app.Option {
	var opts []app.Option
	for name, factory := range Registry() {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}
