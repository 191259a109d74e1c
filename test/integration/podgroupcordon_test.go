package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// A rack cordoned for maintenance: a burn-in group whose pods tolerate the
// cordon and select the rack is placed there by the in-tree generator
// and by GPUCliquePlacement alike; a group that does not tolerate it
// waits, with GPUCliquePlacement's reason.
func TestPodGroupInACordonedRack(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	const ns = "burnin"
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuTemplate(ns, "gb200x4", contract.ClassGPU, 4))
	schedulers := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who := range schedulers {
		for node := range c.nvl72Fleet(who, 1, true) {
			n, err := c.client.CoreV1().Nodes().Get(c.ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Spec.Unschedulable = true
			if _, err := c.client.CoreV1().Nodes().Update(c.ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.runScheduler("podgroups", schedulerConfig(t, bothProfiles, c.schedulerKubeconfig(bothProfiles)), podGroupGates(t))

	groupPods := func(group, scheduler, fleet string, tolerate bool) []string {
		c.podGroup(ns, group, 2)
		var names []string
		for i := range 2 {
			p := podWithTemplate(ns, fmt.Sprintf("%s-%d", group, i), "gb200x4", scheduler)
			p.Spec.NodeSelector = map[string]string{"fleet": fleet, contract.LabelClique: fleet + "-cluster.0"}
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
			if tolerate {
				p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}
			c.create(p)
			names = append(names, p.Name)
		}
		return names
	}
	for who, sched := range schedulers {
		pods := groupPods(who+"-burnin", sched, who, true)
		if ok, _ := c.boundWithin(ns, pods, 60*time.Second); !ok {
			t.Errorf("%s: the burn-in group is not placed in its cordoned rack: %s", who, c.schedulingMessage(ns, pods[0]))
		}
	}
	waiting := groupPods("gputopo-other", "gputopo-scheduler", "gputopo", false)
	c.waitFor("the reason of the group that does not tolerate the cordon", 60*time.Second, func() (bool, error) {
		return strings.Contains(c.schedulingMessage(ns, waiting[0]), "which its pods select; the most free in one is 0"), nil
	})
	c.checkNoDoubleBooking()
}
