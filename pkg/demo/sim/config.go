package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/manifests"
)

// ShippedConfig is the KubeSchedulerConfiguration of the manifests'
// ConfigMap (both profiles), decoded and defaulted the way kube-scheduler
// reads its --config file.
func ShippedConfig() (*schedconfig.KubeSchedulerConfiguration, error) {
	return DecodeConfig(manifests.SchedulerConfigMap)
}

// configMapKey is the key of the manifests' ConfigMap that holds the
// KubeSchedulerConfiguration.
const configMapKey = "scheduler-config.yaml"

// DecodeConfig decodes, defaults and validates a KubeSchedulerConfiguration
// as kube-scheduler reads its --config file; data may also be a ConfigMap
// holding it under scheduler-config.yaml, as the manifests ship it.
func DecodeConfig(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err == nil && meta.Kind == "ConfigMap" {
		var cm v1.ConfigMap
		if err := yaml.Unmarshal(data, &cm); err != nil {
			return nil, fmt.Errorf("scheduler ConfigMap: %w", err)
		}
		inner, ok := cm.Data[configMapKey]
		if !ok {
			return nil, fmt.Errorf("scheduler ConfigMap %s: no data key %s", cm.Name, configMapKey)
		}
		data = []byte(inner)
	}
	obj, gvk, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("scheduler configuration: got %v, want KubeSchedulerConfiguration", gvk)
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	return cfg, nil
}
