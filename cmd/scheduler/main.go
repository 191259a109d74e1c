// Command scheduler is kube-scheduler with gputopo's plugins registered:
// every upstream flag works (--config, leader election, -v, metrics and
// health endpoints); a KubeSchedulerConfiguration enables the plugins in a
// profile (see manifests/scheduler).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(registry.SchedulerOptions()...)))
}
