package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// Claims of a PodGroup (KEP-5729, DRAWorkloadResourceClaims on the API
// server, the resourceclaim controller and the scheduler): one named in
// the group's spec.resourceClaims and one the controller makes from the
// group's template. Each is allocated once and reserved for the PodGroup,
// not its pods. gputopo's profile and the in-tree DynamicResources plugin
// run in one scheduler process on the same API server; both must leave
// the claims alike.
func TestPodGroupOwnedClaims(t *testing.T) {
	c := startPodGroupCluster(t)
	c.deviceClasses()
	profiles := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who, sched := range profiles {
		ns, node := "owned-"+who, who+"-0"
		c.node(node, map[string]string{"fleet": who})
		named := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "group-gpu"},
			Spec:       gpuTemplate(ns, "x", contract.ClassGPU, 1).Spec.Spec,
		}
		c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, pairNode(node), named, gpuTemplate(ns, "two-gpus", contract.ClassGPU, 2))
		groups := map[string]v1.PodResourceClaim{
			"named":    {Name: "gpu", ResourceClaimName: ptr.To("group-gpu")},
			"template": {Name: "gpus", ResourceClaimTemplateName: ptr.To("two-gpus")},
		}
		for group, pc := range groups {
			pg := &schedulingv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: group},
				Spec: schedulingv1beta1.PodGroupSpec{
					SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}},
					ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{{
						Name: pc.Name, ResourceClaimName: pc.ResourceClaimName, ResourceClaimTemplateName: pc.ResourceClaimTemplateName,
					}},
				},
			}
			if _, err := c.client.SchedulingV1beta1().PodGroups(ns).Create(c.ctx, pg, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				p := podWithTemplate(ns, fmt.Sprintf("%s-%d", group, i), "unused", sched)
				p.Spec.ResourceClaims = []v1.PodResourceClaim{pc}
				p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: pc.Name}}
				p.Spec.NodeSelector = map[string]string{"fleet": who}
				p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
				c.create(p)
			}
		}
	}
	c.runScheduler("podgroups", schedulerConfig(t, bothProfiles, c.schedulerKubeconfig(bothProfiles)), podGroupGates(t))

	type outcome struct{ devices, reservedFor string }
	got := map[string]map[string]outcome{}
	for who := range profiles {
		ns := "owned-" + who
		got[who] = map[string]outcome{}
		for group, want := range map[string]int{"named": 1, "template": 2} {
			pods := c.waitScheduled(ns, group+"-0", group+"-1")
			claim := c.groupClaim(ns, group)
			pg, err := c.client.SchedulingV1beta1().PodGroups(ns).Get(c.ctx, group, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var reserved []string
			for _, r := range claim.Status.ReservedFor {
				reserved = append(reserved, fmt.Sprintf("%s/%s %s uid-match=%v", r.APIGroup, r.Resource, r.Name, r.UID == pg.UID))
			}
			o := outcome{devices: fmt.Sprint(len(devicesOf(claim))), reservedFor: fmt.Sprint(reserved)}
			got[who][group] = o
			if wantReserved := fmt.Sprint([]string{"scheduling.k8s.io/podgroups " + group + " uid-match=true"}); o.devices != fmt.Sprint(want) || o.reservedFor != wantReserved {
				t.Errorf("%s, group %s: claim %s has %s devices reserved for %s; want %d reserved for the PodGroup only: %s", who, group, claim.Name, o.devices, o.reservedFor, want, wantReserved)
			}
			for name, p := range pods {
				if st := podClaimStatus(p, claim.Name); group == "template" && !st {
					t.Errorf("%s: pod %s's status does not name the group's claim %s: %+v", who, name, claim.Name, p.Status.ResourceClaimStatuses)
				}
			}
		}
	}
	if fmt.Sprint(got["gputopo"]) != fmt.Sprint(got["intree"]) {
		t.Errorf("gputopo left the group claims as %v, the in-tree plugin as %v", got["gputopo"], got["intree"])
	}
	c.checkNoDoubleBooking()
}

// groupClaim is the claim of the PodGroup's only spec.resourceClaims
// entry: the named one, or the one the controller made and recorded in
// the group's status.
func (c *cluster) groupClaim(ns, group string) *resourceapi.ResourceClaim {
	c.t.Helper()
	var claim *resourceapi.ResourceClaim
	c.waitFor("claim of PodGroup "+group, 30*time.Second, func() (bool, error) {
		pg, err := c.client.SchedulingV1beta1().PodGroups(ns).Get(c.ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		name := ptr.Deref(pg.Spec.ResourceClaims[0].ResourceClaimName, "")
		for _, s := range pg.Status.ResourceClaimStatuses {
			name = ptr.Deref(s.ResourceClaimName, name)
		}
		if name == "" {
			return false, nil
		}
		claim, err = c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, name, metav1.GetOptions{})
		return err == nil && claim.Status.Allocation != nil, nil
	})
	return claim
}

func podClaimStatus(p *v1.Pod, claim string) bool {
	for _, s := range p.Status.ResourceClaimStatuses {
		if ptr.Deref(s.ResourceClaimName, "") == claim {
			return true
		}
	}
	return false
}
