package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/manifests"
)

// ShippedConfig is the KubeSchedulerConfiguration of the manifests'
// ConfigMap (both profiles), decoded and defaulted the way kube-scheduler
// reads its --config file.
func ShippedConfig() (*schedconfig.KubeSchedulerConfiguration, error) {
	var cm v1.ConfigMap
	if err := yaml.Unmarshal(manifests.SchedulerConfigMap, &cm); err != nil {
		return nil, fmt.Errorf("scheduler ConfigMap: %w", err)
	}
	return DecodeConfig([]byte(cm.Data["scheduler-config.yaml"]))
}

// DecodeConfig decodes and defaults a KubeSchedulerConfiguration.
func DecodeConfig(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	obj, gvk, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("scheduler configuration: got %v, want KubeSchedulerConfiguration", gvk)
	}
	return cfg, nil
}
