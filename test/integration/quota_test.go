package integration

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// quota gives the namespace a ResourceQuota with these hard limits and
// the status the quota controller would write (it does not run here):
// ResourceQuota admission then charges every create against it.
func (c *cluster) quota(ns string, hard v1.ResourceList) {
	c.t.Helper()
	q, err := c.client.CoreV1().ResourceQuotas(ns).Create(c.ctx, &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: ns}, Spec: v1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	q.Status.Hard, q.Status.Used = hard.DeepCopy(), v1.ResourceList{}
	for name := range hard {
		q.Status.Used[name] = resource.MustParse("0")
	}
	if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(c.ctx, q, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// After a binding that failed once PreBind had written everything, the
// pod's status still maps its extended resources to the claim that
// Unreserve deleted (the API server keeps the mapping), and ResourceQuota
// admission charges an extended-resource claim the mapping does not name
// on top of the pod's own requests. In a namespace whose quota holds
// exactly the pod's two GPUs, the in-tree plugin's retry, which names
// its claim anew, is refused for exceeding it, every time; gputopo's
// makes the claim under the mapped name and binds. The test driver
// writes the mapping a failed binding leaves, as admin; the schedulers
// run under the manifests' ServiceAccount and RBAC.
func TestRetriedExtendedClaimWithinQuota(t *testing.T) {
	c := startCluster(t, ownerReferencesEnforced)
	c.create(extClass("ext-quota", "example.com/gpu-q"))
	const gone = "p-extended-resources-gone"
	for w, scheduler := range profiles {
		ns := "quota-" + w
		c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		c.node(ns, nil)
		withPairs(c, ns)
		c.quota(ns, v1.ResourceList{"requests.example.com/gpu-q": resource.MustParse("2")})
		c.create(extendedPod(ns, "p", "example.com/gpu-q", scheduler, ns, 2))
		pod, err := c.client.CoreV1().Pods(ns).Get(c.ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: gone,
			RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/gpu-q", RequestName: "container-0-request-0"}}}
		if _, err := c.client.CoreV1().Pods(ns).UpdateStatus(c.ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.startScheduler()

	c.waitFor("gputopo's pod bound", 60*time.Second, func() (bool, error) {
		p, err := c.client.CoreV1().Pods("quota-gputopo").Get(c.ctx, "p", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
	p, err := c.client.CoreV1().Pods("quota-gputopo").Get(c.ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName == "" || p.Status.ExtendedResourceClaimStatus.ResourceClaimName != gone {
		t.Fatalf("gputopo's pod on node %q mapped to %q: want it bound, mapped to %s (%s)", p.Spec.NodeName, p.Status.ExtendedResourceClaimStatus.ResourceClaimName, gone, c.schedulingMessage("quota-gputopo", "p"))
	}
	if claim, err := c.client.ResourceV1().ResourceClaims("quota-gputopo").Get(c.ctx, gone, metav1.GetOptions{}); err != nil || claim.Status.Allocation == nil {
		t.Errorf("claim %s: %v, want it allocated", gone, err)
	}

	// Upstream names the retry's claim anew: the quota refuses it.
	c.waitFor("the in-tree plugin's retry refused by the quota", 60*time.Second, func() (bool, error) {
		return strings.Contains(c.schedulingMessage("quota-intree", "p"), "exceeded quota"), nil
	})
}
