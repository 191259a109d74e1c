package gputopology

import (
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	env := fourGPUNode(t, claim("two", 2).Allocation(alloc).Obj())
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

// The timeout's message names the claims still waiting at its end, not
// one whose conditions were met during the wait.
func TestPreBindBindingTimeoutNamesOnlyWhatStillWaits(t *testing.T) {
	waiting := func(device string) *resourceapi.AllocationResult {
		alloc := allocatedOn("node-a", device)
		alloc.Devices.Results[0].BindingConditions = []string{"Attached"}
		return alloc
	}
	env := fourGPUNode(t, claim("a", 1).Allocation(waiting("gpu-0")).Obj(), claim("b", 1).Allocation(waiting("gpu-1")).Obj())
	env.pl.args.BindingTimeout.Duration = 2 * time.Second
	pod := podWithClaims("p", "a", "b")
	cs := env.scheduleUpTo(pod, "node-a")
	if status := env.pl.Reserve(env.tCtx, cs, pod, "node-a"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		b := env.storedClaim("b").DeepCopy()
		b.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: contract.DefaultDriver, Pool: "node-a", Device: "gpu-1",
			Conditions: []metav1.Condition{{Type: "Attached", Status: metav1.ConditionTrue, Reason: "Attached", LastTransitionTime: metav1.Now()}}}}
		if _, err := env.client.ResourceV1().ResourceClaims(ns).UpdateStatus(env.tCtx, b, metav1.UpdateOptions{}); err != nil {
			t.Errorf("attach b: %v", err)
		}
	}()
	status := env.pl.PreBind(env.tCtx, cs, pod, "node-a")
	if msg := status.Message(); status.IsSuccess() || !strings.Contains(msg, "resourceclaim default/a") || strings.Contains(msg, "resourceclaim default/b") {
		t.Errorf("PreBind: %v, want a timeout naming claim a only", status)
	}
}
