package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/contract"
)

// noticeDevicePlugin taints every published device while the node's
// allocatable has GPUs of a device plugin (NVIDIA's, where the GPU
// Operator runs on a node the agent was not kept off): the device plugin
// hands the same GPUs to pods without a claim, so a claim given one would
// share it with a pod that does not know. It republishes when that
// starts or stops; before the first publish (helper nil) it only records.
func (a *Agent) noticeDevicePlugin(ctx context.Context, node *v1.Node) {
	n := node.Status.Allocatable[v1.ResourceName(contract.ExtendedResourceGPU)]
	a.publishMu.Lock()
	changed := a.layout.SetDevicePluginGPUs(n.Value())
	a.publishMu.Unlock()
	if !changed {
		return
	}
	logger := klog.FromContext(ctx)
	if n.Value() > 0 {
		logger.Error(nil, "A device plugin advertises this node's GPUs: every device is published with a NoSchedule taint, so that no claim gets a GPU the device plugin hands out too; keep the node agent off nodes with a device plugin (docs/install.md)",
			"node", node.Name, "resource", contract.ExtendedResourceGPU, "count", n.Value(), "taint", a.layout.DevicePluginTaintKey())
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
