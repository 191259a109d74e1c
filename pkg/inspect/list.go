package inspect

import (
	"context"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// pageSize is how many objects one list request asks for: a cluster's
// slices, claims and pods come in chunks, not in one response.
const pageSize = 500

// listAll lists every object of a kind in pages of pageSize.
func listAll[T any, PT interface {
	*T
	runtime.Object
}](ctx context.Context, list pager.ListPageFunc, opts metav1.ListOptions) ([]T, error) {
	p := pager.New(list)
	p.PageSize = pageSize
	var out []T
	err := p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		item, ok := obj.(PT)
		if !ok {
			return fmt.Errorf("listed a %T", obj)
		}
		out = append(out, *item)
		return nil
	})
	return out, err
}

func listSlices(ctx context.Context, client kubernetes.Interface, opts metav1.ListOptions) ([]resourceapi.ResourceSlice, error) {
	out, err := listAll[resourceapi.ResourceSlice](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.ResourceV1().ResourceSlices().List(ctx, o)
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	return out, nil
}

// nodeSlices lists the slices whose devices may be on node: those the
// node publishes (spec.nodeName) and those without a nodeName (devices
// placed one by one, node selectors, all nodes), which Devices places
// device by device. Without node, every slice. Each pool's slices are
// taken to be all of one node or all of none, as the kubelet plugin
// helper publishes them, so that its newest generation is among them
// whole.
func nodeSlices(ctx context.Context, client kubernetes.Interface, node string) ([]resourceapi.ResourceSlice, error) {
	if node == "" {
		return listSlices(ctx, client, metav1.ListOptions{})
	}
	var out []resourceapi.ResourceSlice
	for _, nodeName := range []string{node, ""} {
		sl, err := listSlices(ctx, client, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, nodeName).String()})
		if err != nil {
			return nil, err
		}
		out = append(out, sl...)
	}
	return out, nil
}

func listClaims(ctx context.Context, client kubernetes.Interface) ([]resourceapi.ResourceClaim, error) {
	out, err := listAll[resourceapi.ResourceClaim](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, o)
	}, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	return out, nil
}

// unfinishedPods selects the pods that have not ended: pods that
// succeeded or failed hold no devices and wait for nothing.
var unfinishedPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodFailed)),
).String()

func listUnfinishedPods(ctx context.Context, client kubernetes.Interface) ([]v1.Pod, error) {
	out, err := listAll[v1.Pod](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	}, metav1.ListOptions{FieldSelector: unfinishedPods})
	if err != nil {
		return nil, fmt.Errorf("list Pods: %w", err)
	}
	return out, nil
}

// listTaintRules lists the DeviceTaintRules, whose taints the scheduler
// adds to the devices they select. A user the role does not allow to
// list them is warned on warn and gets the devices' own taints only; an
// API server that does not serve them has none to apply.
func listTaintRules(ctx context.Context, client kubernetes.Interface, warn io.Writer) ([]resourceapi.DeviceTaintRule, error) {
	out, err := listAll[resourceapi.DeviceTaintRule](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.ResourceV1().DeviceTaintRules().List(ctx, o)
	}, metav1.ListOptions{})
	switch {
	case err == nil:
		return out, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		_, werr := fmt.Fprintf(warn, "Warning: DeviceTaintRules not read, their taints are not shown (the gputopo-viewer role of manifests/kubectl may list them): %v\n", err)
		return nil, werr
	}
	return nil, fmt.Errorf("list DeviceTaintRules: %w", err)
}
