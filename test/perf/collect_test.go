package perf

import (
	"maps"
	"slices"

	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

// sliMetric is the pod's end-to-end scheduling latency: from entering the
// active queue until bound, all attempts included. The harness's default
// latency, scheduler_scheduling_attempt_duration_seconds, starts when the
// pod leaves the queue, so a scheduler whose scheduling cycle is quicker
// moves a burst's wait from the queue into binding and reads slower by it
// at the same throughput.
const sliMetric = "scheduler_pod_scheduling_sli_duration_seconds"

// labelValues is one label filter of the harness's metrics collector
// configuration (scheduler_perf's labelValues, in its YAML form).
type labelValues struct {
	Label  string   `json:"label"`
	Values []string `json:"values"`
}

// collectedMetrics is the metricsCollectorConfig written into every test
// case that has none: the harness's defaults (defaultMetricsCollectorConfig,
// which it does not export) plus sliMetric, and gputopo's plugins among
// the per-plugin durations. nil filters aggregate every label value.
func collectedMetrics() map[string]any {
	points := metrics.ExtensionPoints
	results := []string{metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult}
	plugins := append(slices.Clone(perf.PluginNames), slices.Sorted(maps.Keys(registry.Registry()))...)
	events := schedframework.AllClusterEventLabels()
	return map[string]any{"metrics": map[string][]labelValues{
		"scheduler_framework_extension_point_duration_seconds": {{"extension_point", points}},
		"scheduler_scheduling_attempt_duration_seconds":        {{"result", results}},
		"scheduler_pod_scheduling_duration_seconds":            nil,
		sliMetric: nil,
		"scheduler_plugin_execution_duration_seconds":        {{"plugin", plugins}, {"extension_point", points}},
		"scheduler_queueing_hint_execution_duration_seconds": {{"plugin", plugins}, {"event", events}},
		"scheduler_event_handling_duration_seconds":          {{"event", events}},
		"scheduler_podgroup_scheduling_attempt_duration_seconds": {{"result",
			[]string{metrics.WaitingOnPreemptionResult, metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult}}},
		"scheduler_podgroup_scheduling_algorithm_duration_seconds": nil,
	}}
}
