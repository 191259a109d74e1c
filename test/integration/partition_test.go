package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubeSchedulerUser is the identity of the cluster's own kube-scheduler,
// bound to the built-in system:kube-scheduler role.
const kubeSchedulerUser = "system:kube-scheduler"

// startKubeScheduler runs the cluster's kube-scheduler: the same binary
// with upstream's default configuration (one profile, default-scheduler,
// in-tree DynamicResources) as system:kube-scheduler, in its own process.
func (c *cluster) startKubeScheduler() *process {
	c.t.Helper()
	kubeconfig := c.impersonatingKubeconfig(kubeSchedulerUser)
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 500, burst: 1000}
`, kubeconfig)
	path := filepath.Join(c.t.TempDir(), "kube-scheduler.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return c.runScheduler("kube-scheduler", path)
}

// accelNode publishes devices of another driver on a node.
func accelNode(node string, n int) *resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for i := range n {
		devs = append(devs, resourceapi.Device{Name: fmt.Sprintf("accel-%d", i)})
	}
	s := slice(node, "accel", 1, devs)
	s.Spec.Driver = accelDriver
	return s
}

const accelDriver = "accel.example.com"

func accelClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: accelDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", accelDriver)}}}},
	}
}

// waitPolicyActive waits until the API server enforces the partition
// policy (it loads policies asynchronously).
func (c *cluster) waitPolicyActive() {
	c.t.Helper()
	probe := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "partition-probe"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}},
	}
	c.create(probe)
	c.waitFor("partition policy enforced", 30*time.Second, func() (bool, error) {
		claim, err := c.client.ResourceV1().ResourceClaims("default").Get(c.ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if claim.Status.Allocation != nil { // written before the policy was loaded
			claim.Status.Allocation = nil
			_, err = c.client.ResourceV1().ResourceClaims("default").UpdateStatus(c.ctx, claim, metav1.UpdateOptions{})
			return false, err
		}
		claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpus", Driver: driver, Pool: "probe", Device: "gpu-0"}}}}
		_, err = c.client.ResourceV1().ResourceClaims("default").UpdateStatus(c.ctx, claim, metav1.UpdateOptions{})
		return err != nil && strings.Contains(err.Error(), "allocated only by gputopo-scheduler"), nil
	})
	if err := c.client.ResourceV1().ResourceClaims("default").Delete(c.ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// The second-scheduler install: the cluster's kube-scheduler and gputopo
// run as two processes with their own in-flight records. The manifests'
// partition policy keeps each to its own devices, so that no device is
// ever held twice: GPU pods on the wrong scheduler stay pending with the
// policy's message, the others bind.
func TestSecondSchedulerPartition(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	c.create(accelClass())
	c.apply("../../manifests/scheduler/base", "")
	c.apply("../../manifests/scheduler/second-scheduler", "")
	c.waitPolicyActive()
	for i := range 2 {
		n := fmt.Sprintf("gpu-%d", i)
		c.node(n, nil)
		c.create(nvswitchNode(n))
	}
	c.node("accel", nil)
	c.create(accelNode("accel", 8))
	const ns = "default"
	c.create(gpuTemplate(ns, "one-gpu", driver, 1), gpuTemplate(ns, "one-accel", accelDriver, 1))

	c.startKubeScheduler()
	c.startSchedulerWith(gputopoOnly)
	var gputopoGPU, kubeGPU, kubeAccel []string
	for i := range 12 { // 24 GPU pods on 16 GPUs
		gputopoGPU = append(gputopoGPU, fmt.Sprintf("gputopo-gpu-%d", i))
		kubeGPU = append(kubeGPU, fmt.Sprintf("kube-gpu-%d", i))
		c.create(podWithTemplate(ns, gputopoGPU[i], "one-gpu", "gputopo-scheduler"), podWithTemplate(ns, kubeGPU[i], "one-gpu", v1.DefaultSchedulerName))
	}
	for i := range 4 {
		kubeAccel = append(kubeAccel, fmt.Sprintf("kube-accel-%d", i))
		c.create(podWithTemplate(ns, kubeAccel[i], "one-accel", v1.DefaultSchedulerName))
	}
	// gputopo leaves the other driver's devices alone (args.drivers), also
	// for a pod that needs a GPU as well: refused before PreBind writes
	// its GPU claim, which the API server's refusal of the other would
	// have left allocated with no pod to use it.
	refusedByGputopo := []string{"gputopo-accel", "gputopo-gpu-and-accel"}
	c.create(podWithTemplate(ns, refusedByGputopo[0], "one-accel", "gputopo-scheduler"),
		withTemplate(podWithTemplate(ns, refusedByGputopo[1], "one-gpu", "gputopo-scheduler"), "accel", "one-accel"))
	// Admin access takes no device: the partition lets either scheduler
	// grant it, here a monitoring pod's on a GPU by kube-scheduler.
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring", Labels: map[string]string{resourceapi.DRAAdminNamespaceLabelKey: "true"}}})
	adminGPU := gpuTemplate("monitoring", "admin-gpu", driver, 1)
	adminGPU.Spec.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	c.create(adminGPU, podWithTemplate("monitoring", "kube-admin-gpu", "admin-gpu", v1.DefaultSchedulerName))

	c.waitScheduled(ns, append(gputopoGPU, kubeAccel...)...)
	c.waitScheduled("monitoring", "kube-admin-gpu")
	c.waitRefused(ns, kubeGPU, "allocated only by gputopo-scheduler")
	for _, name := range refusedByGputopo {
		c.waitRefused(ns, []string{name}, "request gpus: its device class selects devices of driver accel.example.com, which this scheduler leaves to others")
	}
	// Give the refused pods time to retry; none may bind.
	time.Sleep(5 * time.Second)
	for _, name := range append(kubeGPU, refusedByGputopo...) {
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s across the partition", name, p.Spec.NodeName)
		}
	}
	c.checkNoDoubleBooking()
	if held := c.allocatedDevices(driver); held != 12 {
		t.Errorf("%d GPUs allocated, want 12 (the gputopo pods')", held)
	}
}

// withTemplate gives the pod's container one more claim, named name,
// from template.
func withTemplate(p *v1.Pod, name, template string) *v1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: name, ResourceClaimTemplateName: &template})
	c := &p.Spec.Containers[0]
	c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: name})
	return p
}

// waitRefused waits until one of the pods reports the refusal in its
// PodScheduled condition. Any one, not a fixed one: while the wrong
// scheduler's pods compete for the same free GPUs, a pod whose last try
// found them in flight for another pod reads "cannot allocate" and waits
// in the unschedulable queue, with no event to retry it for minutes,
// while the pod that tries last keeps reaching the API server's refusal.
func (c *cluster) waitRefused(ns string, pods []string, refusal string) {
	c.t.Helper()
	seen := map[string]string{}
	defer func() {
		if c.t.Failed() {
			for _, name := range pods {
				c.t.Logf("pod %s/%s: last scheduling message %q", ns, name, seen[name])
			}
		}
	}()
	c.waitFor(fmt.Sprintf("pods %v refused with %q", pods, refusal), 60*time.Second, func() (bool, error) {
		for _, name := range pods {
			seen[name] = c.schedulingMessage(ns, name)
			if strings.Contains(seen[name], refusal) {
				return true, nil
			}
		}
		return false, nil
	})
}

// allocatedDevices counts the devices of a driver that claims hold.
func (c *cluster) allocatedDevices(drv string) int {
	c.t.Helper()
	claims, err := c.client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	n := 0
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == drv && !ptr.Deref(r.AdminAccess, false) {
				n++
			}
		}
	}
	return n
}
