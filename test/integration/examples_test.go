package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
)

func podWithTemplate(ns, name, template, scheduler string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			SchedulerName: scheduler,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "dev"}}}}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: &template}},
		},
	}
}

func devicesOf(claim *resourceapi.ResourceClaim) []string {
	var out []string
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			out = append(out, r.Device)
		}
	}
	return out
}

// (a) every manifest applies and the scheduler starts from the ConfigMap;
// (b) the DRA article's examples get the devices they ask for.
func TestManifestsAndArticleExamples(t *testing.T) {
	c := startCluster(t)
	applied := c.apply("../../manifests/scheduler/base", "gputopo-system")
	applied = append(applied, c.apply("../../manifests/scheduler", "gputopo-system")...)
	applied = append(applied, c.apply("../../manifests/scheduler/deviceclasses", "")...)
	applied = append(applied, c.apply("../../manifests/examples", "default")...)
	for _, want := range []string{"namespace/gputopo-system", "clusterrole/gputopo-scheduler", "configmap/gputopo-scheduler-config",
		"deployment/gputopo-scheduler", "deviceclass/gpu.nvidia.com", "deviceclass/mig.nvidia.com", "deviceclass/shared.gpu.nvidia.com",
		"resourceclaimtemplate/gpu-claim-template", "resourceclaimtemplate/mig-partition-template", "resourceclaimtemplate/a100-80gb-or-two-40gb"} {
		if !slices.Contains(applied, want) {
			t.Errorf("%s not among the applied manifests %v", want, applied)
		}
	}

	c.node("a100-80", nil)
	c.node("a100-40x2", nil)
	c.node("a100-40", nil)
	c.node("l4", nil)
	c.node("mig", nil)
	c.create(
		gpuNode("a100-80", gpuSpec{product: "NVIDIA A100-SXM4-80GB", memMiB: 81920, pcie: "pci0"}),
		gpuNode("a100-40x2", gpuSpec{product: "NVIDIA A100-SXM4-40GB", memMiB: 40960, pcie: "pci0"}, gpuSpec{product: "NVIDIA A100-SXM4-40GB", memMiB: 40960, pcie: "pci1"}),
		gpuNode("a100-40", gpuSpec{product: "NVIDIA A100-SXM4-40GB", memMiB: 40960, pcie: "pci0"}),
		gpuNode("l4", gpuSpec{product: "NVIDIA L4", memMiB: 23034, pcie: "pci0"}, gpuSpec{product: "NVIDIA L4", memMiB: 23034, pcie: "pci1"}),
	)
	for _, s := range migNode("mig", 1) {
		c.create(s)
	}
	c.startScheduler()

	// First available: the 80GB A100 first, then (it is taken) two 40GB.
	c.create(podWithTemplate("default", "fa-1", "a100-80gb-or-two-40gb", "gputopo-scheduler"))
	fa1 := c.waitScheduled("default", "fa-1")["fa-1"]
	c.create(podWithTemplate("default", "fa-2", "a100-80gb-or-two-40gb", "gputopo-scheduler"))
	fa2 := c.waitScheduled("default", "fa-2")["fa-2"]
	// GPU with >= 40000 MiB: only the spare 40GB A100 is left.
	c.create(podWithTemplate("default", "llm-inference", "gpu-claim-template", "gputopo-scheduler"))
	llm := c.waitScheduled("default", "llm-inference")["llm-inference"]
	// A MIG 1g.10gb partition.
	c.create(podWithTemplate("default", "mig-user", "mig-partition-template", "gputopo-scheduler"))
	mig := c.waitScheduled("default", "mig-user")["mig-user"]

	check := func(pod *v1.Pod, node, request string, devices ...string) {
		t.Helper()
		if pod.Spec.NodeName != node {
			t.Errorf("pod %s on node %s, want %s", pod.Name, pod.Spec.NodeName, node)
		}
		var claim *resourceapi.ResourceClaim
		c.waitFor("allocation of "+pod.Name, 30*time.Second, func() (bool, error) {
			claim = c.claimOf(pod, "dev")
			return claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 1, nil
		})
		if got := devicesOf(claim); !slices.Equal(got, devices) && devices != nil {
			t.Errorf("pod %s: devices %v, want %v", pod.Name, got, devices)
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Request != request {
				t.Errorf("pod %s: result for request %s, want %s", pod.Name, r.Request, request)
			}
		}
		if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
			t.Errorf("claim %s lacks the %s finalizer", claim.Name, resourceapi.Finalizer)
		}
		if claim.Status.ReservedFor[0].UID != pod.UID {
			t.Errorf("claim %s reserved for %v, want pod %s", claim.Name, claim.Status.ReservedFor, pod.Name)
		}
	}
	check(fa1, "a100-80", "gpus/one-80gb", "gpu-0")
	check(fa2, "a100-40x2", "gpus/two-40gb", "gpu-0", "gpu-1")
	check(llm, "a100-40", "gpu", "gpu-0")
	check(mig, "mig", "mig-slice")
	if d := devicesOf(c.claimOf(mig, "dev")); len(d) != 1 || !strings.Contains(d[0], "mig-1g10gb-") {
		t.Errorf("MIG pod got %v, want one 1g.10gb partition", d)
	}

	// The example pods apply too (in their own namespace, with their
	// templates); they are not scheduled against this fleet.
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "example-pods"}})
	c.ensureRuntimeClass("nvidia") // the example pods run under NVIDIA's runtime
	c.apply("../../manifests/examples", "example-pods")
	for _, p := range c.apply("../../manifests/examples/pods", "example-pods") {
		if !strings.HasPrefix(p, "pod/") {
			t.Errorf("unexpected object %s among the example pods", p)
		}
	}

	// The claim tells which devices it got and why.
	claims, err := c.client.ResourceV1().ResourceClaims("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	explained := false
	for _, cl := range claims.Items {
		note := cl.Annotations[gputopology.PlacementAnnotation]
		if strings.HasPrefix(cl.Name, "fa-2-") && strings.Contains(note, "gpu-0,gpu-1") && strings.Contains(note, "best of") {
			explained = true
		}
	}
	if !explained {
		t.Errorf("claim of fa-2 carries no %s annotation naming its devices", gputopology.PlacementAnnotation)
	}
}
