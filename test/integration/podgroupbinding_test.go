package integration

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// A gang member's claim allocated in a rack that lacks room for the
// rest of the group, its binding conditions never met: within
// GPUTopology's bindingTimeout (10 minutes) it holds the group to that
// rack, which waits and says why; past it the claim holds the group
// nowhere, the group is tried in the rack with room, GPUTopology frees
// the claim when its pod cannot join there, and the group runs whole in
// that rack. The claim's pod is created last, so that the others are
// tried first. A claim without binding conditions left allocated and
// unreserved (an attempt whose binding failed, a leader that died before
// binding) holds the group only while its rack has room: here the group
// runs whole in the other rack too.
func TestPodGroupClaimPastBindingTimeout(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	cliqueOf := c.nvl72Fleet("f", 2, false)
	c.nvl72Fleet("h", 2, false)
	for node, clique := range c.nvl72Fleet("g", 2, false) {
		cliqueOf[node] = clique
	}
	const ns = "groups"
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuTemplate(ns, "gb200x4", contract.ClassGPU, 4))
	// Rack 0 of each fleet: the claim on tray 0, another user's on tray 1.
	c.allocatedOn(ns, "stale", "f-r0-t00", 4, true, &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)})
	c.allocatedOn(ns, "other-f", "f-r0-t01", 4, false, nil)
	c.allocatedOn(ns, "binding", "h-r0-t00", 4, true, &metav1.Time{Time: time.Now().Truncate(time.Second)})
	c.allocatedOn(ns, "other-h", "h-r0-t01", 4, false, nil)
	c.allocatedOn(ns, "leftover", "g-r0-t00", 4, false, nil)
	c.allocatedOn(ns, "other-g", "g-r0-t01", 4, false, nil)
	c.runScheduler("podgroups", schedulerConfig(t, bothProfiles, c.schedulerKubeconfig(bothProfiles)), podGroupGates(t))

	// 18 pods of 4 GPUs each: the claim's pod and 68 GPUs more, where
	// rack 0 has 64 free.
	group := func(fleet, claim string) []string {
		c.podGroup(ns, fleet, 18)
		pods := c.groupPods(ns, fleet, "gputopo-scheduler", fleet, 0, 17)
		last := podWithTemplate(ns, fleet+"-claimed", "", "gputopo-scheduler")
		last.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To(claim)}}
		last.Spec.NodeSelector = map[string]string{"fleet": fleet}
		last.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(fleet)}
		c.create(last)
		return append(pods, last.Name)
	}
	past := group("f", "stale")
	within := group("h", "binding")
	left := group("g", "leftover")

	for fleet, pods := range map[string][]string{"f": past, "g": left} {
		ok, nodes := c.boundWithin(ns, pods, 120*time.Second)
		if !ok {
			t.Fatalf("group %s not bound (%d of %d pods): %s", fleet, len(nodes), len(pods), c.schedulingMessage(ns, pods[len(pods)-1]))
		}
		for _, p := range pods {
			if got := cliqueOf[nodes[p]]; got != fleet+"-cluster.1" {
				t.Errorf("pod %s on %s in clique %s, want %s-cluster.1, the rack with room", p, nodes[p], got, fleet)
			}
		}
	}

	c.waitFor("group h's reason", 60*time.Second, func() (bool, error) {
		return strings.Contains(c.schedulingMessage(ns, within[0]), "needs at least 68 free GPUs in "+contract.LabelClique+" h-cluster.0, where its allocated claims' devices are; the most free in one is 64"), nil
	})
	binding, err := c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, "binding", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := binding.Status.Allocation; a == nil || a.Devices.Results[0].Pool != "h-r0-t00" {
		t.Errorf("claim binding, within its binding timeout, was moved or freed: %+v", a)
	}
	for _, p := range within {
		if pod, err := c.client.CoreV1().Pods(ns).Get(c.ctx, p, metav1.GetOptions{}); err != nil || pod.Spec.NodeName != "" {
			t.Errorf("pod %s of group h is bound to %q (%v), want it waiting", p, pod.Spec.NodeName, err)
		}
	}
	c.checkNoDoubleBooking()
}
