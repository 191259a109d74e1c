// Package manifests holds gputopo's install manifests. The scheduler
// configuration and DeviceClasses are embedded for the demo
// (cmd/demo), which runs the same configuration in-process; the test
// builds every kustomization the way `kubectl apply -k` does.
package manifests

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"
)

// SchedulerConfigMap is manifests/scheduler/configmap.yaml: the
// default-scheduler and gputopo-scheduler profiles.
//
//go:embed scheduler/configmap.yaml
var SchedulerConfigMap []byte

// DeviceClasses is manifests/scheduler/deviceclasses/deviceclasses.yaml.
//
//go:embed scheduler/deviceclasses/deviceclasses.yaml
var DeviceClasses []byte

// ExtendedResourcePatch is the patch of the extended-resource overlay
// (manifests/scheduler/extended-resource): the class that also serves
// resources.limits nvidia.com/gpu.
//
//go:embed scheduler/extended-resource/gpu-extended-resource.yaml
var ExtendedResourcePatch []byte

// PodGroupsFeatureGates is the patch of the pod-groups overlay
// (manifests/pod-groups): the scheduler's --feature-gates argument for
// pod groups.
//
//go:embed pod-groups/feature-gates.yaml
var PodGroupsFeatureGates []byte

// SchedulerConfigKey is the key of the scheduler ConfigMap that holds the
// KubeSchedulerConfiguration.
const SchedulerConfigKey = "scheduler-config.yaml"

// SchedulerConfigFrom is the KubeSchedulerConfiguration a ConfigMap like
// SchedulerConfigMap holds under SchedulerConfigKey.
func SchedulerConfigFrom(configMap []byte) ([]byte, error) {
	var cm struct {
		Metadata struct{ Name string } `json:"metadata"`
		Data     map[string]string     `json:"data"`
	}
	if err := yaml.Unmarshal(configMap, &cm); err != nil {
		return nil, fmt.Errorf("scheduler ConfigMap: %w", err)
	}
	cfg, ok := cm.Data[SchedulerConfigKey]
	if !ok {
		return nil, fmt.Errorf("scheduler ConfigMap %s: no data key %s", cm.Metadata.Name, SchedulerConfigKey)
	}
	return []byte(cfg), nil
}
