package integration

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// extendedPod asks for n of an extended resource, without claims.
func extendedPod(ns, name, res, scheduler, node string, n int64) *v1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			SchedulerName: scheduler,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceName(res): q}, Requests: v1.ResourceList{v1.ResourceName(res): q}}}},
		},
	}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	return p
}

// advertise sets an extended resource in a node's allocatable, as a
// device plugin does.
func (c *cluster) advertise(node, res string, n int64) {
	c.t.Helper()
	nd, err := c.client.CoreV1().Nodes().Get(c.ctx, node, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.Status.Capacity[v1.ResourceName(res)] = *resource.NewQuantity(n, resource.DecimalSI)
	nd.Status.Allocatable[v1.ResourceName(res)] = *resource.NewQuantity(n, resource.DecimalSI)
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(c.ctx, nd, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// A pod that asks for a DRA extended resource (a DeviceClass's
// extendedResourceName) through gputopo's profile is never bound without
// devices: where DRA would have to serve it, it stays pending with a
// reason; where a device plugin advertises the resource, it binds there.
func TestExtendedResourceNotBoundWithoutDevices(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns, res = "default", "example.com/gpu"
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "example-gpu"},
		Spec: resourceapi.DeviceClassSpec{
			ExtendedResourceName: ptr.To(res),
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}},
		},
	}
	c.create(class)
	c.node("dra", nil)
	c.create(nvswitchNode("dra"))
	c.node("device-plugin", nil)
	c.advertise("device-plugin", res, 4)
	c.startSchedulerWith(gputopoOnly)

	c.create(extendedPod(ns, "via-dra", res, "gputopo-scheduler", "dra", 1))
	c.create(extendedPod(ns, "implicit", "deviceclass.resource.kubernetes.io/gpu.nvidia.com", "gputopo-scheduler", "dra", 1))
	c.create(extendedPod(ns, "via-plugin", res, "gputopo-scheduler", "device-plugin", 2))
	c.waitScheduled(ns, "via-plugin")
	for pod, want := range map[string]string{
		"via-dra":  "extended resource example.com/gpu (DeviceClass example-gpu) is backed by DRA on this node",
		"implicit": "extended resource deviceclass.resource.kubernetes.io/gpu.nvidia.com (DeviceClass gpu.nvidia.com) is backed by DRA",
	} {
		c.waitFor(pod+" refused with a reason", 30*time.Second, func() (bool, error) {
			return strings.Contains(c.schedulingMessage(ns, pod), want), nil
		})
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s without devices", pod, p.Spec.NodeName)
		}
	}
	if n := c.allocatedDevices(driver); n != 0 {
		t.Errorf("%d devices allocated, want none", n)
	}
}
