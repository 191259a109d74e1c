package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// setNodeCPU changes a node's CPU.
func (c *cluster) setNodeCPU(node, cpu string) {
	c.t.Helper()
	nd, err := c.client.CoreV1().Nodes().Get(c.ctx, node, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.Status.Capacity[v1.ResourceCPU] = resource.MustParse(cpu)
	nd.Status.Allocatable[v1.ResourceCPU] = resource.MustParse(cpu)
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(c.ctx, nd, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// reapTerminating stands in for the kubelet: pods being deleted go away.
func (c *cluster) reapTerminating(ctx context.Context, ns string) {
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					_ = c.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
			}
			return false, nil
		})
	}()
}

func withPriority(p *v1.Pod, class, cpu string) *v1.Pod {
	p.Spec.PriorityClassName = class
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	}
	return p
}

// Preemption next to claims, gputopo's profile against the in-tree
// plugin's on the same API server: a high-priority pod that needs only
// CPU a low-priority pod holds evicts exactly that pod; one whose claim
// cannot be allocated evicts nobody, even where evicting a victim would
// free its GPU (Kubernetes 1.37's preemption does not free devices, and
// both plugins report such nodes as unresolvable).
func TestPreemptionWithClaims(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	for name, value := range map[string]int32{"low": 10, "high": 100000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := c.client.SchedulingV1().PriorityClasses().Create(c.ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.create(gpuTemplate(ns, "one", driver, 1), gpuTemplate(ns, "two", driver, 2))
	h100 := gpuSpec{product: "NVIDIA H100 80GB HBM3", memMiB: 81559}
	schedulers := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who := range schedulers {
		for _, kind := range []string{"gpus", "cpu"} {
			node := kind + "-" + who
			c.node(node, nil)
			c.create(gpuNode(node, h100, h100))
		}
		c.setNodeCPU("cpu-"+who, "4")
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	c.reapTerminating(ctx, ns)
	c.startScheduler()
	for who, sched := range schedulers {
		c.create(withPriority(podOn(ns, "gpus-low-"+who, "two", sched, "gpus-"+who), "low", ""),
			withPriority(podOn(ns, "cpu-low-"+who, "one", sched, "cpu-"+who), "low", "4"))
	}
	for who := range schedulers {
		c.waitScheduled(ns, "gpus-low-"+who, "cpu-low-"+who)
	}
	for who, sched := range schedulers {
		c.create(withPriority(podOn(ns, "gpus-high-"+who, "one", sched, "gpus-"+who), "high", ""),
			withPriority(podOn(ns, "cpu-high-"+who, "one", sched, "cpu-"+who), "high", "1"))
	}
	for who := range schedulers {
		t.Run(who, func(t *testing.T) {
			c.waitScheduled(ns, "cpu-high-"+who)
			if _, err := c.client.CoreV1().Pods(ns).Get(c.ctx, "cpu-low-"+who, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the CPU victim cpu-low-%s was not evicted: %v", who, err)
			}
			c.waitFor("gpus-high-"+who+" rejected", 30*time.Second, func() (bool, error) {
				return c.schedulingMessage(ns, "gpus-high-"+who) != "", nil
			})
			high, err := c.client.CoreV1().Pods(ns).Get(c.ctx, "gpus-high-"+who, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if high.Spec.NodeName != "" || high.Status.NominatedNodeName != "" {
				t.Errorf("gpus-high-%s: node %q, nominated %q; want neither", who, high.Spec.NodeName, high.Status.NominatedNodeName)
			}
			low, err := c.client.CoreV1().Pods(ns).Get(c.ctx, "gpus-low-"+who, metav1.GetOptions{})
			if err != nil || low.DeletionTimestamp != nil {
				t.Errorf("gpus-low-%s evicted for a claim preemption cannot serve (err %v)", who, err)
			}
			t.Logf("%s: %s", who, fmt.Sprint(c.schedulingMessage(ns, "gpus-high-"+who)))
		})
	}
	c.checkNoDoubleBooking()
}
