package agent

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/contract"
)

// noticeDevicePlugin taints every published device while a device plugin
// advertises the node's GPUs (NVIDIA's, where the GPU Operator runs on a
// node the agent was not kept off): the device plugin hands the same
// GPUs to pods without a claim, so a claim given one would share it with
// a pod that does not know. It republishes when that starts or stops;
// before the first publish (helper nil) it only records.
func (a *Agent) noticeDevicePlugin(ctx context.Context, node *v1.Node) {
	n := devicePluginGPUs(node)
	a.publishMu.Lock()
	changed := a.layout.SetDevicePlugin(n > 0)
	a.publishMu.Unlock()
	if !changed {
		return
	}
	logger := klog.FromContext(ctx)
	if n > 0 {
		logger.Error(nil, "A device plugin advertises this node's GPUs: every device is published with a NoSchedule taint, so that no claim gets a GPU the device plugin hands out too; keep the node agent off nodes with a device plugin (docs/install.md)",
			"node", node.Name, "count", n, "taint", a.layout.DevicePluginTaintKey())
	} else {
		logger.Info("No device plugin advertises this node's GPUs any more: the devices are published without its taint", "node", node.Name, "taint", a.layout.DevicePluginTaintKey())
	}
	if a.helper == nil {
		return
	}
	if err := a.publish(ctx); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Republishing after the device plugin changed")
	}
}

// devicePluginGPUs counts what NVIDIA's device plugin advertises on the
// node under any of its strategies: whole GPUs (contract.ExtendedResourceGPU),
// time-sliced ones renamed (nvidia.com/gpu.shared) and MIG devices
// (nvidia.com/mig-<profile>). Capacity counts too: allocatable leaves out
// the GPUs the device plugin finds unhealthy, which its pods may still
// hold; the kubelet zeroes both once the device plugin is gone.
func devicePluginGPUs(node *v1.Node) int64 {
	var n int64
	for _, list := range []v1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		var here int64
		for name, q := range list {
			if s := string(name); s == contract.ExtendedResourceGPU || s == contract.ExtendedResourceGPU+".shared" || strings.HasPrefix(s, "nvidia.com/mig-") {
				here += q.Value()
			}
		}
		n = max(n, here)
	}
	return n
}
