package gputopology

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/gputopo/gputopo/pkg/contract"
)

// A claim allocated elsewhere without a timestamp has no deadline of its
// own: PreBind's wait ends after bindingTimeout with an error that names
// the claim and the devices still waiting, and counts as a timeout in
// kube-scheduler's binding-condition metrics, as the in-tree plugin
// counts it.
func TestPreBindBindingTimeoutWithoutTimestamp(t *testing.T) {
	// kube-scheduler's metrics, new and registered (a metric not
	// registered counts nothing).
	schedmetrics.InitMetrics()
	metrics.NewKubeRegistry().MustRegister(schedmetrics.DRABindingConditionsAllocationsTotal, schedmetrics.DRABindingConditionsPreBindDuration)
	alloc := allocatedOn("node-a", "gpu-0", "gpu-2")
	for i := range alloc.Devices.Results {
		alloc.Devices.Results[i].BindingConditions = []string{"Attached"}
	}
	env := newTestEnv(t, objects{
		nodes:   []*v1.Node{node("node-a")},
		classes: []*resourceapi.DeviceClass{gpuClass},
		slices:  []*resourceapi.ResourceSlice{pairSlice("node-a", 4)},
		claims:  []*resourceapi.ResourceClaim{claim("two", 2).Allocation(alloc).Obj()},
	})
	env.pl.args.BindingTimeout.Duration = time.Second
	pod := podWithClaims("p", "two")
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	status := env.pl.PreBind(env.tCtx, cs, pod, "node-a")
	want := "device binding timeout: resourceclaim default/two: binding conditions not met within 1s: waiting for node-a/gpu-0 (Attached) node-a/gpu-2 (Attached)"
	if status.IsSuccess() || !strings.Contains(status.Message(), want) {
		t.Errorf("PreBind: %v, want an error containing %q", status, want)
	}
	profile := env.pl.fh.ProfileName()
	if got, err := testutil.GetCounterMetricValue(schedmetrics.DRABindingConditionsAllocationsTotal.WithLabelValues(profile, contract.DefaultDriver, schedmetrics.BindingConditionsStatusTimeout)); err != nil || got != 2 {
		t.Errorf("binding-condition allocations counted as timeouts: %v (%v), want 2", got, err)
	}
	if got, err := testutil.GetHistogramMetricCount(schedmetrics.DRABindingConditionsPreBindDuration.WithLabelValues(profile, contract.DefaultDriver, schedmetrics.BindingConditionsStatusTimeout)); err != nil || got != 2 {
		t.Errorf("binding waits observed: %v (%v), want 2", got, err)
	}
}
