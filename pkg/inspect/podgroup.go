package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// writeGroup says where the pod's group stands: its gang's minCount
// against the pods that exist (the scheduler does not try a gang before
// minCount of its pods exist, and writes no condition meanwhile), its
// topology constraint, and the PodGroup's scheduling condition. It reads
// the PodGroup (get) and the namespace's pods that have not ended (list,
// in pages): a member that succeeded or failed no longer counts. A PodGroup that
// does not exist is said; what it cannot read is its error.
func writeGroup(ctx context.Context, client kubernetes.Interface, b *strings.Builder, pod *v1.Pod, name string) error {
	pg, err := client.SchedulingV1beta1().PodGroups(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && notServed(err):
		return fmt.Errorf("pod group %s: the API server does not serve scheduling.k8s.io/v1beta1 PodGroups: %w", name, err)
	case apierrors.IsNotFound(err):
		fmt.Fprintf(b, "pod group %s: not found (the scheduler waits for the PodGroup to exist)\n", name)
		return nil
	case err != nil:
		return fmt.Errorf("pod group %s: %w", name, err)
	}
	pods, err := listAll[v1.Pod](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Pods(pod.Namespace).List(ctx, o)
	}, metav1.ListOptions{FieldSelector: unfinishedPods})
	if err != nil {
		return fmt.Errorf("pod group %s: list its pods: %w", name, err)
	}
	members, bound := 0, 0
	for _, p := range pods {
		if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName == name {
			members++
			if p.Spec.NodeName != "" {
				bound++
			}
		}
	}
	fmt.Fprintf(b, "pod group %s: %d pods, %d bound\n", name, members, bound)
	if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
		fmt.Fprintf(b, "  gang: at least %d pods start together\n", gang.MinCount)
		if missing := int(gang.MinCount) - members; missing > 0 && bound == 0 {
			fmt.Fprintf(b, "  waiting for %d more pod(s) of the group to exist before the scheduler tries it\n", missing)
		}
	}
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		fmt.Fprintf(b, "  topology: all pods within one %s domain\n", c.Topology[0].Key)
	}
	if cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled); cond != nil {
		fmt.Fprintf(b, "  %s=%s (%s): %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return nil
}

// notServed reports whether a NotFound error is the API server's for a
// resource it does not serve (no object named in its details), not for
// a missing object.
func notServed(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}
