package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gputopo/gputopo/manifests"
)

// shippedConfig is the shipped scheduler configuration and a context
// that ends with the test or after five minutes.
func shippedConfig(t *testing.T) (context.Context, *schedconfig.KubeSchedulerConfiguration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	cfg, err := ShippedConfig()
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cfg
}

// A configuration is read as kube-scheduler reads its --config file: from
// the file or from the ConfigMap the manifests ship, and validated.
func TestDecodeConfigValidatesAndUnwrapsTheConfigMap(t *testing.T) {
	if _, err := DecodeConfig(manifests.SchedulerConfigMap); err != nil {
		t.Errorf("the shipped ConfigMap: %v", err)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"percentage", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 500\n", "percentageOfNodesToScore"},
		{"profile twice", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: a\n", "profiles[1].schedulerName: Duplicate value"},
		{"ConfigMap without the key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {other: x}\n", "scheduler ConfigMap cm: no data key scheduler-config.yaml"},
	} {
		if _, err := DecodeConfig([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
