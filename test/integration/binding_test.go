package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const (
	attached = "gpu.example.com/attached"
	failed   = "gpu.example.com/attach-failed"
)

// bindingNode publishes GPUs that must report attached before a pod may
// bind (device binding conditions, as for fabric-attached devices).
func bindingNode(node string) *resourceapi.ResourceSlice {
	s := gpuNode(node, gpuSpec{product: "NVIDIA H100 80GB HBM3", memMiB: 81559}, gpuSpec{product: "NVIDIA H100 80GB HBM3", memMiB: 81559})
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.BindingConditions = []string{attached}
		d.BindingFailureConditions = []string{failed}
		d.BindsToNode = ptr.To(true)
	}
	return s
}

// setDeviceCondition writes what the driver reports for every allocated
// device of the claim.
func (c *cluster) setDeviceCondition(claim *resourceapi.ResourceClaim, condition string) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := c.client.ResourceV1().ResourceClaims(claim.Namespace).Get(c.ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if latest.Status.Allocation == nil {
			return fmt.Errorf("claim %s is not allocated", claim.Name)
		}
		latest.Status.Devices = nil
		for _, r := range latest.Status.Allocation.Devices.Results {
			var conds []metav1.Condition
			apimeta.SetStatusCondition(&conds, metav1.Condition{Type: condition, Status: metav1.ConditionTrue, Reason: "Test", ObservedGeneration: latest.Generation})
			latest.Status.Devices = append(latest.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device, Conditions: conds})
		}
		_, err = c.client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(c.ctx, latest, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatalf("device status of claim %s: %v", claim.Name, err)
	}
}

// allocatedClaim waits until the pod's claim is allocated and returns it.
func (c *cluster) allocatedClaim(ns, pod string, after *metav1.Time) *resourceapi.ResourceClaim {
	c.t.Helper()
	var claim *resourceapi.ResourceClaim
	c.waitFor("allocation of "+pod+"'s claim", 90*time.Second, func() (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, pod, metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, nil
		}
		claim, err = c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil || claim.Status.Allocation == nil {
			return false, nil
		}
		ts := claim.Status.Allocation.AllocationTimestamp
		return after == nil || ts != nil && ts.After(after.Time), nil
	})
	return claim
}

// allocatedElsewhere creates claim name for one GPU, allocated on node's
// gpu-0 as another allocator would write it (the device's binding
// conditions copied, no allocation timestamp), and the device attached.
func (c *cluster) allocatedElsewhere(ns, name, node string) {
	c.t.Helper()
	c.setDeviceCondition(c.allocatedOn(ns, name, node, 1, true, nil), attached)
}

// allocatedOn creates claim name for gpus GPUs and writes its allocation
// on node's gpu-0 onwards, as another allocator (or an earlier scheduler)
// would leave it: with the devices' binding conditions when binding, and
// allocated at the given time (none when nil).
func (c *cluster) allocatedOn(ns, name, node string, gpus int, binding bool, at *metav1.Time) *resourceapi.ResourceClaim {
	c.t.Helper()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gpuTemplate(ns, name, driver, int64(gpus)).Spec.Spec,
	}
	created, err := c.client.ResourceV1().ResourceClaims(ns).Create(c.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create claim %s: %v", name, err)
	}
	alloc := &resourceapi.AllocationResult{
		AllocationTimestamp: at,
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	for i := range gpus {
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: driver, Pool: node, Device: fmt.Sprintf("gpu-%d", i)}
		if binding {
			r.BindingConditions, r.BindingFailureConditions = []string{attached}, []string{failed}
		}
		alloc.Devices.Results = append(alloc.Devices.Results, r)
	}
	created.Status.Allocation = alloc
	allocated, err := c.client.ResourceV1().ResourceClaims(ns).UpdateStatus(c.ctx, created, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatalf("allocate claim %s: %v", name, err)
	}
	return allocated
}

// Devices with binding conditions: when a device reports its failure
// condition, or the binding timeout passes (counted from the claim's
// allocationTimestamp), the claim is deallocated and allocated anew, and
// the pod binds once the new devices report attached. The in-tree plugin
// (default-scheduler profile) and GPUTopology run the same steps on the
// same API server. A claim allocated elsewhere without a timestamp is
// where they part: only GPUTopology binds its pod.
func TestBindingConditions(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	const timeout = 6 * time.Second
	c.create(gpuTemplate(ns, "one", driver, 1))
	schedulers := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who := range schedulers {
		for _, kind := range []string{"fail", "timeout", "prealloc"} {
			node := kind + "-" + who
			c.node(node, nil)
			c.create(bindingNode(node))
		}
		c.allocatedElsewhere(ns, "prealloc-"+who, "prealloc-"+who)
	}
	cfg := schedulerConfigWith(t, bothProfiles, c.schedulerKubeconfig(bothProfiles), func(cfg map[string]any) {
		profileArgs(cfg, "gputopo-scheduler", "GPUTopology", map[string]any{"bindingTimeout": timeout.String()})
		profileArgs(cfg, "default-scheduler", "DynamicResources", map[string]any{
			"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs", "bindingTimeout": timeout.String()})
	})
	c.runScheduler("gputopo", cfg)
	for who, sched := range schedulers {
		for _, kind := range []string{"fail", "timeout"} {
			c.create(podOn(ns, kind+"-"+who, "one", sched, kind+"-"+who))
		}
		p := podOn(ns, "prealloc-"+who, "", sched, "prealloc-"+who)
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To("prealloc-" + who)}}
		c.create(p)
	}
	for who := range schedulers {
		t.Run(who, func(t *testing.T) {
			// A failure condition: allocated anew at once.
			first := c.allocatedClaim(ns, "fail-"+who, nil)
			c.setDeviceCondition(first, failed)
			second := c.allocatedClaim(ns, "fail-"+who, first.Status.Allocation.AllocationTimestamp)
			c.setDeviceCondition(second, attached)

			// No condition at all: allocated anew after the timeout.
			first = c.allocatedClaim(ns, "timeout-"+who, nil)
			second = c.allocatedClaim(ns, "timeout-"+who, first.Status.Allocation.AllocationTimestamp)
			if d := second.Status.Allocation.AllocationTimestamp.Sub(first.Status.Allocation.AllocationTimestamp.Time); d < timeout {
				t.Errorf("%s: allocated anew %s after the first allocation, before the %s timeout", who, d, timeout)
			}
			c.setDeviceCondition(second, attached)

			c.waitScheduled(ns, "fail-"+who, "timeout-"+who)
		})
	}
	// Allocated elsewhere without a timestamp, its device attached: the
	// in-tree plugin's PreBind writes a timestamp into the allocation,
	// which the API server refuses, on every attempt; GPUTopology leaves
	// the allocation as it is and binds.
	c.waitScheduled(ns, "prealloc-gputopo")
	c.waitFor("in-tree PreBind refused on prealloc-intree", 60*time.Second, func() (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, "prealloc-intree", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != "" {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && strings.Contains(cond.Message, "field cannot be modified once set") {
				return true, nil
			}
		}
		return false, nil
	})
	if claim, err := c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, "prealloc-gputopo", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if len(claim.Status.ReservedFor) != 1 || claim.Status.Allocation.AllocationTimestamp != nil {
		t.Errorf("prealloc-gputopo: reservedFor %v, timestamp %v; want the pod, and no timestamp", claim.Status.ReservedFor, claim.Status.Allocation.AllocationTimestamp)
	}
	c.checkNoDoubleBooking()
}
