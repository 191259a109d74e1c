// Command scheduler is kube-scheduler with gputopo's plugins registered:
// every upstream flag works (--config, leader election, -v,
// --logging-format=json, --feature-gates, metrics and health endpoints,
// client-go and version metrics, registered by the same imports as
// cmd/kube-scheduler); a KubeSchedulerConfiguration enables the plugins in
// a profile (see manifests/scheduler).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // kubernetes_build_info
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(registry.SchedulerOptions()...)))
}
