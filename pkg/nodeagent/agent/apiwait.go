package agent

import (
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// awaitSliceAccess lists the node's ResourceSlices, as the slice
// controller's informer will, until that works, logging every failure
// with its cause. Without it an agent that cannot reach the API server,
// or may not list slices, waits in that informer, whose errors show only
// at -v=4: a Running pod with an empty log.
func awaitSliceAccess(ctx context.Context, client kubernetes.Interface, driver, node string, first, most time.Duration) error {
	logger := klog.FromContext(ctx)
	selector := nodeSlices(driver, node)
	delay := first
	for {
		_, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector, Limit: 1})
		if err == nil {
			return nil
		}
		logger.Error(err, "Cannot list this node's ResourceSlices; retrying", "node", node, "driver", driver, "retryIn", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("node agent: list ResourceSlices of node %s: %w", node, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, most)
	}
}

// nodeSlices selects the driver's ResourceSlices of the node.
func nodeSlices(driver, node string) string {
	return fields.Set{resourceapi.ResourceSliceSelectorDriver: driver, resourceapi.ResourceSliceSelectorNodeName: node}.AsSelector().String()
}
