package sim

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/manifests"
	"github.com/gputopo/gputopo/pkg/plugins/registry"
	"github.com/gputopo/gputopo/pkg/strictyaml"
)

// ShippedConfig is the KubeSchedulerConfiguration of the manifests'
// ConfigMap (both profiles), read as DecodeConfig reads one.
func ShippedConfig() (*schedconfig.KubeSchedulerConfiguration, error) {
	return DecodeConfig(manifests.SchedulerConfigMap)
}

// DecodeConfig decodes, defaults and validates a KubeSchedulerConfiguration
// as gputopo's scheduler reads its --config file (kube-scheduler's
// validation, then registry.CheckConfig; non-finite numbers named by
// field); data may also be a ConfigMap holding it, as the manifests ship
// it.
func DecodeConfig(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err == nil && meta.Kind == "ConfigMap" {
		inner, err := manifests.SchedulerConfigFrom(data)
		if err != nil {
			return nil, err
		}
		data = inner
	}
	if err := strictyaml.CheckFinite(data); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
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
	if err := registry.CheckConfig(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// CheckProfiles starts cfg's profiles as New would, on an empty
// in-memory API, and stops them: a plugin that is not registered, or
// args its New refuses, fail here rather than in the first replay.
func CheckProfiles(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration) error {
	s, err := New(ctx, cfg, NewClient())
	if err != nil {
		return err
	}
	s.Stop()
	return nil
}
