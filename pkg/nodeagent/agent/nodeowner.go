package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// ownNode is the agent's Node, whose UID its slices name as their owner.
func ownNode(ctx context.Context, o Options) (*v1.Node, error) {
	node, err := o.KubeClient.CoreV1().Nodes().Get(ctx, o.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node agent: read node %s: %w", o.NodeName, err)
	}
	return node, nil
}

// followNode stops the agent once its Node is deleted and created again
// under the same name (kubectl delete node, and the kubelet registers it
// anew while the agent's pod lives on). The slices' owner reference names
// the old Node's UID, so the garbage collector would delete them and the
// slice controller recreate them with the same stale owner, over and
// over. The restarted agent (the DaemonSet restarts it) publishes for
// the new Node, and labels it. It also notices a clique label that
// another tool changed (noticeLabelDrift), and a device plugin that
// starts or stops advertising the node's GPUs (noticeDevicePlugin).
func (a *Agent) followNode(ctx context.Context, uid types.UID) {
	factory := informers.NewSharedInformerFactoryWithOptions(a.opts.KubeClient, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.opts.NodeName).String()
	}))
	check := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok || n.Name != a.opts.NodeName {
			return
		}
		if n.UID != uid {
			a.HandleError(ctx, fmt.Errorf("node %s was created again (UID %s, was %s): restarting, so that its ResourceSlices name the new Node as their owner", n.Name, n.UID, uid), "Node replaced")
			return
		}
		a.noticeLabelDrift(n.Labels)
		a.noticeDevicePlugin(ctx, n)
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		a.HandleError(ctx, err, "Following the node")
		return
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}
