package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// allocatedTray creates claim name for the four GPUs of node, allocated
// there as another allocator (or an earlier scheduler) left it: with
// binding conditions that no driver reported when bindingSince is set,
// allocated at that time.
func (c *cluster) allocatedTray(ns, name, node string, bindingSince *metav1.Time) {
	c.t.Helper()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gpuTemplate(ns, name, contract.ClassGPU, 4).Spec.Spec,
	}
	created, err := c.client.ResourceV1().ResourceClaims(ns).Create(c.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create claim %s: %v", name, err)
	}
	alloc := &resourceapi.AllocationResult{
		AllocationTimestamp: bindingSince,
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	for i := range 4 {
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: driver, Pool: node, Device: fmt.Sprintf("gpu-%d", i)}
		if bindingSince != nil {
			r.BindingConditions, r.BindingFailureConditions = []string{attached}, []string{failed}
		}
		alloc.Devices.Results = append(alloc.Devices.Results, r)
	}
	created.Status.Allocation = alloc
	if _, err := c.client.ResourceV1().ResourceClaims(ns).UpdateStatus(c.ctx, created, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("allocate claim %s: %v", name, err)
	}
}

// A gang member's claim allocated in a rack, its binding conditions never
// met and past the binding timeout, holds the group to that rack, which
// lacks room for the rest. GPUCliquePlacement tries the group there all
// the same; GPUTopology finds the claim unusable and frees it, and the
// group then runs whole in the other rack. Refused before any trial, the
// group would wait on that claim for good.
func TestPodGroupClaimPastBindingTimeout(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	cliqueOf := c.nvl72Fleet("f", 2, false)
	const ns = "groups"
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuTemplate(ns, "gb200x4", contract.ClassGPU, 4))
	c.allocatedTray(ns, "stale", "f-r0-t00", &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)})
	c.allocatedTray(ns, "other", "f-r0-t01", nil)
	cfg := schedulerConfigWith(t, bothProfiles, c.schedulerKubeconfig(), func(cfg map[string]any) {
		profileArgs(cfg, "gputopo-scheduler", "GPUTopology", map[string]any{"bindingTimeout": "5s"})
	})
	c.runScheduler("podgroups", cfg, podGroupGates(t))

	// 18 pods of 4 GPUs: the stale claim's pod and 68 GPUs more, where
	// rack 0 has 64 free.
	c.podGroup(ns, "g", 18)
	first := podWithTemplate(ns, "g-0", "", "gputopo-scheduler")
	first.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To("stale")}}
	first.Spec.NodeSelector = map[string]string{"fleet": "f"}
	first.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("g")}
	c.create(first)
	pods := append([]string{first.Name}, c.groupPods(ns, "g", "gputopo-scheduler", "f", 1, 17)...)
	ok, nodes := c.boundWithin(ns, pods, 120*time.Second)
	if !ok {
		t.Fatalf("group g not bound (%d of %d pods): %s", len(nodes), len(pods), c.schedulingMessage(ns, pods[0]))
	}
	for _, p := range pods {
		if got := cliqueOf[nodes[p]]; got != "f-cluster.1" {
			t.Errorf("pod %s on %s in clique %s, want f-cluster.1, the rack with room", p, nodes[p], got)
		}
	}
	c.checkNoDoubleBooking()
}
