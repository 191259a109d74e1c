package inspect

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writeGroup says where the pod's group stands: its gang's minCount
// against the pods that exist (the scheduler does not try a gang before
// minCount of its pods exist, and writes no condition meanwhile), its
// topology constraint, and the PodGroup's scheduling condition. It reads
// the PodGroup (get) and the namespace's pods (list).
func writeGroup(ctx context.Context, client kubernetes.Interface, b *strings.Builder, pod *v1.Pod, name string) {
	pg, err := client.SchedulingV1beta1().PodGroups(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(b, "pod group %s: %v (the scheduler waits for the PodGroup to exist)\n", name, err)
		return
	}
	if err != nil {
		fmt.Fprintf(b, "pod group %s: %v\n", name, err)
		return
	}
	pods, err := client.CoreV1().Pods(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "pod group %s: list its pods: %v\n", name, err)
		return
	}
	members, bound := 0, 0
	for _, p := range pods.Items {
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
}
