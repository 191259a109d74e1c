// Package registry lists gputopo's scheduler plugins for the
// kube-scheduler command, integration tests and benchmarks.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/gputopo/gputopo/pkg/plugins/consumable"
	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/plugins/partitionable"
)

// Registry returns gputopo's plugin factories by name.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		gputopology.Name:    gputopology.New,
		partitionable.Name: partitionable.New,
		consumable.Name:    consumable.New,
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
