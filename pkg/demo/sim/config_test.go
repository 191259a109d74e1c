package sim

import (
	"context"
	"testing"
	"time"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
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
