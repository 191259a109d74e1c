package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// adoptPublishedTaints keeps the taints an earlier run published when
// its health state could not be read (restoreErr), rather than lift a
// fatal Xid's taint at the first publish.
func (a *Agent) adoptPublishedTaints(ctx context.Context, restoreErr error) {
	logger := klog.FromContext(ctx)
	taints, err := publishedTaints(ctx, a.opts.KubeClient, a.layout)
	if err != nil {
		logger.Error(errors.Join(restoreErr, err), "GPU health taints from before this start are lost; starting afresh")
		return
	}
	logger.Error(restoreErr, "GPU health state unreadable; keeping the taints the node's slices carry", "tainted", len(taints))
	a.monitor.Adopt(ctx, taints)
}

// publishedTaints are the health taints on the devices this node's
// slices carry now, by GPU UUID: what an earlier run of the agent
// published. A GPU whose devices carry both effects gets NoExecute.
func publishedTaints(ctx context.Context, client kubernetes.Interface, layout *resources.Layout) (map[string]resources.Taint, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: nodeSlices(layout.Driver, layout.Node)})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of node %s: %w", layout.Node, err)
	}
	out := map[string]resources.Taint{}
	for _, slice := range list.Items {
		// Other drivers' or nodes' slices, should a selector be ignored.
		if slice.Spec.Driver != layout.Driver || slice.Spec.NodeName == nil || *slice.Spec.NodeName != layout.Node {
			continue
		}
		for _, dev := range slice.Spec.Devices {
			uuid := gpuUUIDOf(dev)
			if uuid == "" {
				continue
			}
			for _, t := range dev.Taints {
				if t.Key != layout.TaintKey() || !worse(t.Effect, out[uuid].Effect) {
					continue
				}
				var since time.Time
				if t.TimeAdded != nil {
					since = t.TimeAdded.Time
				}
				out[uuid] = resources.Taint{Value: t.Value, Effect: t.Effect, Since: since}
			}
		}
	}
	return out, nil
}

// gpuUUIDOf is the UUID of the GPU a published device is or is a
// partition of: by its attributes, not its name, which follows NVML's
// enumeration index and may name another GPU after a change.
func gpuUUIDOf(dev resourceapi.Device) string {
	for _, name := range []resourceapi.QualifiedName{contract.AttrUUID, contract.AttrParentUUID} {
		if a, ok := dev.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

// worse says whether a health taint of effect e is worse than one of
// effect than ("" for none).
func worse(e, than resourceapi.DeviceTaintEffect) bool {
	switch e {
	case resourceapi.DeviceTaintEffectNoExecute:
		return than != resourceapi.DeviceTaintEffectNoExecute
	case resourceapi.DeviceTaintEffectNoSchedule:
		return than == ""
	}
	return false
}
