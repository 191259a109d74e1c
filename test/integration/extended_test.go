package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/topology"
)

// amounts of extended resources, by name.
type amounts map[string]int64

// extContainer asks for the amounts as requests and limits.
func extContainer(name string, a amounts) v1.Container {
	list := v1.ResourceList{}
	for res, n := range a {
		list[v1.ResourceName(res)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return v1.Container{Name: name, Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{Limits: list, Requests: list}}
}

// extendedPod asks for n of an extended resource, without claims.
func extendedPod(ns, name, res, scheduler, node string, n int64) *v1.Pod {
	return extPodWith(ns, name, scheduler, node, nil, []v1.Container{extContainer("c", amounts{res: n})})
}

func extPodWith(ns, name, scheduler, node string, init, main []v1.Container) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.PodSpec{SchedulerName: scheduler, InitContainers: init, Containers: main},
	}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	return p
}

// extClass maps an extended resource to GPUs of gpu.nvidia.com.
func extClass(name, res string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{
			ExtendedResourceName: ptr.To(res),
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}},
		},
	}
}

// advertise sets an extended resource in a node's allocatable, as a
// device plugin does.
func (c *cluster) advertise(node, res string, n int64) {
	c.t.Helper()
	nd, err := c.client.CoreV1().Nodes().Get(c.ctx, node, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.Status.Capacity[v1.ResourceName(res)] = *resource.NewQuantity(n, resource.DecimalSI)
	nd.Status.Allocatable[v1.ResourceName(res)] = *resource.NewQuantity(n, resource.DecimalSI)
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(c.ctx, nd, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// extOutcome is what a scheduler did with an extended-resource pod, in
// the terms both profiles share.
type extOutcome struct {
	Bound    bool
	Claim    bool // pod.status.extendedResourceClaimStatus set
	Requests []resourceapi.DeviceRequest
	Mappings []v1.ContainerExtendedResourceRequest
	Devices  int
}

// extendedOutcome waits until the pod is bound or refused and reads
// what the scheduler wrote; it checks the claim as upstream makes it.
func (c *cluster) extendedOutcome(ns, name string) (extOutcome, []string) {
	c.t.Helper()
	var pod *v1.Pod
	c.waitFor(name+" bound or refused", 60*time.Second, func() (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		if p.Spec.NodeName != "" {
			return p.Status.ExtendedResourceClaimStatus != nil || c.extendedClaimOf(p) == nil, nil
		}
		return c.schedulingMessage(ns, name) != "", nil
	})
	out := extOutcome{Bound: pod.Spec.NodeName != ""}
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		if claim := c.extendedClaimOf(pod); claim != nil {
			c.t.Errorf("pod %s: claim %s made without being recorded in the pod's status", name, claim.Name)
		}
		return out, nil
	}
	out.Claim, out.Mappings = true, st.RequestMappings
	claim, err := c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("pod %s: claim %s in its status: %v", name, st.ResourceClaimName, err)
	}
	out.Requests = claim.Spec.Devices.Requests
	switch {
	case claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true":
		c.t.Errorf("claim %s lacks the annotation %s", claim.Name, resourceapi.ExtendedResourceClaimAnnotation)
	case claim.GenerateName != name+"-extended-resources-" || !strings.HasPrefix(claim.Name, claim.GenerateName):
		c.t.Errorf("claim %s (generateName %q) is not named after pod %s", claim.Name, claim.GenerateName, name)
	case len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0].UID != pod.UID || !ptr.Deref(claim.OwnerReferences[0].Controller, false):
		c.t.Errorf("claim %s: owners %+v, want pod %s as controller", claim.Name, claim.OwnerReferences, name)
	case claim.Status.Allocation == nil:
		c.t.Errorf("claim %s of bound pod %s is not allocated", claim.Name, name)
	case len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != pod.UID:
		c.t.Errorf("claim %s reserved for %+v, want pod %s", claim.Name, claim.Status.ReservedFor, name)
	}
	var devices []string
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			devices = append(devices, r.Pool+"/"+r.Device)
		}
	}
	out.Devices = len(devices)
	return out, devices
}

// extendedClaimOf finds a claim annotated as the pod's extended-resource
// claim.
func (c *cluster) extendedClaimOf(pod *v1.Pod) *resourceapi.ResourceClaim {
	claims, err := c.client.ResourceV1().ResourceClaims(pod.Namespace).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for i, cl := range claims.Items {
		for _, o := range cl.OwnerReferences {
			if o.UID == pod.UID && cl.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
				return &claims.Items[i]
			}
		}
	}
	return nil
}

// extCase is one behavior of DRA extended resources: what each copy of
// its node gets, the pod, and whether it binds.
type extCase struct {
	name    string
	classes []*resourceapi.DeviceClass
	// prepare gives the node its devices (slices, a device plugin's
	// allocatable).
	prepare func(c *cluster, node string)
	pod     func(ns, name, scheduler, node string) *v1.Pod
	bound   bool
	// bestLink: gputopo's devices are at this link class.
	bestLink topology.LinkClass
	// intreeFails says why the in-tree plugin cannot bind a pod that
	// gputopo binds (docs/scheduler.md); the test holds both to it.
	intreeFails string
}

func withPairs(c *cluster, node string) { c.create(pairNode(node)) }

// asking is a case's pod that asks for n of res in one container.
func asking(res string, n int64) func(ns, name, scheduler, node string) *v1.Pod {
	return func(ns, name, scheduler, node string) *v1.Pod {
		return extendedPod(ns, name, res, scheduler, node, n)
	}
}

// profiles: each copy's scheduler.
var profiles = map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}

var extCases = []extCase{
	{
		// The shipped overlay's class (manifests/scheduler/extended-resource).
		name: "nvidia-gpu", prepare: withPairs, bound: true,
		pod:      asking("nvidia.com/gpu", 2),
		bestLink: topology.LinkNVLink,
	},
	{
		name: "explicit", classes: []*resourceapi.DeviceClass{extClass("ext-explicit", "example.com/gpu-a")}, prepare: withPairs, bound: true,
		pod:      asking("example.com/gpu-a", 2),
		bestLink: topology.LinkNVLink,
	},
	{
		name: "implicit", prepare: withPairs, bound: true,
		pod:      asking("deviceclass.resource.kubernetes.io/gpu.nvidia.com", 2),
		bestLink: topology.LinkNVLink,
	},
	{
		name: "eight", classes: []*resourceapi.DeviceClass{extClass("ext-eight", "example.com/gpu-8")}, prepare: withPairs, bound: true,
		pod:      asking("example.com/gpu-8", 8),
		bestLink: topology.LinkSystem,
	},
	{
		name: "containers", classes: []*resourceapi.DeviceClass{extClass("ext-containers", "example.com/gpu-c")}, prepare: withPairs, bound: true,
		pod: func(ns, name, s, node string) *v1.Pod {
			side := extContainer("proxy", amounts{"example.com/gpu-c": 1})
			side.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
			return extPodWith(ns, name, s, node,
				[]v1.Container{extContainer("setup", amounts{"example.com/gpu-c": 6}), side, extContainer("warmup", amounts{"example.com/gpu-c": 3})},
				[]v1.Container{extContainer("main", amounts{"example.com/gpu-c": 2}), extContainer("helper", amounts{"example.com/gpu-c": 1, "cpu": 1})})
		},
	},
	{
		name: "device-plugin", classes: []*resourceapi.DeviceClass{extClass("ext-plugin", "example.com/gpu-d")}, bound: true,
		prepare: func(c *cluster, node string) { c.advertise(node, "example.com/gpu-d", 4) },
		pod:     asking("example.com/gpu-d", 2),
	},
	{
		name: "split", bound: true,
		classes: []*resourceapi.DeviceClass{extClass("ext-split-1", "example.com/gpu-e1"), extClass("ext-split-2", "example.com/gpu-e2")},
		prepare: func(c *cluster, node string) {
			withPairs(c, node)
			c.advertise(node, "example.com/gpu-e1", 4)
		},
		pod: func(ns, name, s, node string) *v1.Pod {
			return extPodWith(ns, name, s, node, nil, []v1.Container{extContainer("c", amounts{"example.com/gpu-e1": 1, "example.com/gpu-e2": 2})})
		},
		bestLink: topology.LinkNVLink,
	},
	{
		name: "two-classes", classes: []*resourceapi.DeviceClass{extClass("ext-two-a", "example.com/gpu-g"), extClass("ext-two-b", "example.com/gpu-g")},
		prepare: withPairs, bound: true,
		pod:      asking("example.com/gpu-g", 2),
		bestLink: topology.LinkNVLink,
	},
	{
		// A claim of its own next to the extended resource: both are
		// allocated in one go, the claim's GPU next to the pair.
		name: "with-claim", classes: []*resourceapi.DeviceClass{extClass("ext-mixed", "example.com/gpu-m")}, prepare: withPairs, bound: true,
		pod: func(ns, name, s, node string) *v1.Pod {
			p := extendedPod(ns, name, "example.com/gpu-m", s, node, 2)
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "own", ResourceClaimTemplateName: ptr.To("ext-one-gpu")}}
			p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "own"}}
			return p
		},
		bestLink: topology.LinkNVLink,
	},
	{
		// Its own claim next to a resource the node's device plugin
		// serves: nothing for DRA to add. In-tree still makes an
		// extended-resource claim without requests, whose mapping in the
		// pod's status is empty, which that patch refuses: PreBind fails
		// on every attempt. gputopo makes none.
		name: "with-claim-device-plugin", classes: []*resourceapi.DeviceClass{extClass("ext-mixed-plugin", "example.com/gpu-p")}, bound: true,
		prepare: func(c *cluster, node string) {
			withPairs(c, node)
			c.advertise(node, "example.com/gpu-p", 4)
		},
		pod: func(ns, name, s, node string) *v1.Pod {
			p := extendedPod(ns, name, "example.com/gpu-p", s, node, 2)
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "own", ResourceClaimTemplateName: ptr.To("ext-one-gpu")}}
			p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "own"}}
			return p
		},
		intreeFails: "an extended-resource claim without requests, refused when recorded in the pod's status",
	},
	{
		name: "too-large", classes: []*resourceapi.DeviceClass{extClass("ext-large", "example.com/gpu-l")}, prepare: withPairs,
		pod: asking("example.com/gpu-l", 9),
	},
}

// Every behavior of DRA extended resources (KEP-5004) through gputopo
// matches the in-tree DynamicResources plugin on the same API server in
// the same test: each case's pod goes once through each profile, on its
// own copy of the node, and the outcomes (bound or not, the claim's
// requests and devices, the pod's status mapping) must be equal. Where
// upstream defines no order (which GPUs), gputopo's must be the best
// link class.
func TestExtendedResourceParity(t *testing.T) {
	c := startCluster(t, ownerReferencesEnforced)
	c.extendedResourceClasses()
	const ns = "default"
	c.create(gpuTemplate(ns, "ext-one-gpu", "gpu.nvidia.com", 1))
	for _, tc := range extCases {
		for _, cl := range tc.classes {
			c.create(cl)
		}
		for w := range profiles {
			node := "ext-" + tc.name + "-" + w
			c.node(node, nil)
			if tc.prepare != nil {
				tc.prepare(c, node)
			}
		}
	}
	// A class that disappears before the pod: the resource is no longer
	// DRA's, and no node advertises it.
	gone := extClass("ext-gone", "example.com/gpu-h")
	c.create(gone)
	if err := c.client.ResourceV1().DeviceClasses().Delete(c.ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := append(extCases, extCase{name: "class-gone", prepare: withPairs,
		pod: asking("example.com/gpu-h", 1)})
	for w := range profiles {
		node := "ext-class-gone-" + w
		c.node(node, nil)
		withPairs(c, node)
	}
	c.startScheduler()
	for _, tc := range cases {
		for w, sched := range profiles {
			c.create(tc.pod(ns, "ext-"+tc.name+"-"+w, sched, "ext-"+tc.name+"-"+w))
		}
	}
	for _, tc := range cases {
		got := map[string]extOutcome{}
		var ours []string
		for w := range profiles {
			out, devices := c.extendedOutcome(ns, "ext-"+tc.name+"-"+w)
			got[w] = out
			if w == "gputopo" {
				ours = devices
			}
		}
		switch {
		case tc.intreeFails != "":
			if got["intree"].Bound {
				t.Errorf("%s: the in-tree plugin bound the pod, which it could not (%s): drop intreeFails and the difference in docs/scheduler.md", tc.name, tc.intreeFails)
			}
			t.Logf("%s: in-tree: %s", tc.name, c.schedulingMessage(ns, "ext-"+tc.name+"-intree"))
		default:
			if diff := cmp.Diff(got["intree"], got["gputopo"]); diff != "" {
				t.Errorf("%s: gputopo differs from the in-tree plugin (-in-tree +gputopo):\n%s", tc.name, diff)
			}
		}
		if got["gputopo"].Bound != tc.bound {
			t.Errorf("%s: bound %v, want %v (%s)", tc.name, got["gputopo"].Bound, tc.bound, c.schedulingMessage(ns, "ext-"+tc.name+"-gputopo"))
		}
		if tc.bestLink != 0 && len(ours) > 1 {
			if l := c.linkClass(ours); l != tc.bestLink {
				t.Errorf("%s: gputopo's devices %v are at link class %s, want %s", tc.name, ours, l, tc.bestLink)
			}
		}
		t.Logf("%s: %+v", tc.name, got["gputopo"])
	}
	c.checkNoDoubleBooking()
	c.checkClaimOwnersDoNotBlock(ns, "ext-"+cases[0].name+"-gputopo")
}

// checkClaimOwnersDoNotBlock shows why the scheduler's role needs no
// pods/finalizers: under OwnerReferencesPermissionEnforcement its
// service account cannot create a claim whose pod owner blocks deletion,
// and the extended-resource claims both profiles created have none.
func (c *cluster) checkClaimOwnersDoNotBlock(ns, podName string) {
	c.t.Helper()
	pod, err := c.client.CoreV1().Pods(ns).Get(c.ctx, podName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg, err := clientConfigFromKubeconfig(c.schedulerKubeconfig(bothProfiles))
	if err != nil {
		c.t.Fatal(err)
	}
	cfg.UserAgent = probeUserAgent
	blocking := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "blocking-", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}}}}
	claimsAsScheduler := kubernetes.NewForConfigOrDie(cfg).ResourceV1().ResourceClaims(ns)
	_, err = claimsAsScheduler.Create(c.ctx, blocking, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot set blockOwnerDeletion") {
		c.t.Errorf("the scheduler created a claim that blocks its pod's deletion: %v, want it refused for blockOwnerDeletion", err)
	}
	// The same claim owned as the plugins own theirs is allowed.
	blocking.OwnerReferences[0].BlockOwnerDeletion = nil
	created, err := claimsAsScheduler.Create(c.ctx, blocking, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("the scheduler may not create a claim its pod owns: %v", err)
	}
	if err := claimsAsScheduler.Delete(c.ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
	claims, err := c.client.ResourceV1().ResourceClaims(ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, claim := range claims.Items {
		for _, o := range claim.OwnerReferences {
			if ptr.Deref(o.BlockOwnerDeletion, false) {
				c.t.Errorf("claim %s blocks the deletion of its owner %s", claim.Name, o.Name)
			}
		}
	}
}

// A claim an earlier attempt left for the pod (the scheduler stopped or
// binding failed after PreBind created it) is not reused: PostFilter
// deletes it and the next attempt makes a new one, as the in-tree plugin
// does.
func TestExtendedResourceStaleClaim(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns, res = "default", "example.com/gpu-s"
	c.create(extClass("ext-stale", res))
	stale := map[string]string{}
	for w, sched := range profiles {
		node := "stale-" + w
		// The pod waits for its node's label, so that the stale claim is
		// there before its first attempt.
		pod := extendedPod(ns, "stale-"+w, res, sched, "", 2)
		pod.Spec.NodeSelector = map[string]string{"ready": node}
		c.create(pod)
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: pod.Name + "-extended-resources-",
				Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "container-0-request-0",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "ext-stale", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}},
		}
		created, err := c.client.ResourceV1().ResourceClaims(ns).Create(c.ctx, claim, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale[w] = created.Name
		c.node(node, map[string]string{"ready": "not-yet"})
		c.create(pairNode(node))
	}
	c.startScheduler()
	for w := range profiles {
		c.label("stale-"+w, "ready", "stale-"+w)
	}
	for w := range profiles {
		c.waitFor("stale claim of "+w+" deleted", 30*time.Second, func() (bool, error) {
			_, err := c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, stale[w], metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		// The in-tree plugin does not requeue the pod for the deletion
		// (gputopo does): a node update does, for both.
		c.label("stale-"+w, "touched", "yes")
	}
	c.waitScheduled(ns, "stale-gputopo", "stale-intree")
	for w := range profiles {
		out, _ := c.extendedOutcome(ns, "stale-"+w)
		if !out.Bound || !out.Claim || out.Devices != 2 {
			t.Errorf("%s: %+v, want bound with a claim of 2 devices", w, out)
		}
		p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, "stale-"+w, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := p.Status.ExtendedResourceClaimStatus; st == nil || st.ResourceClaimName == stale[w] {
			t.Errorf("%s: extended resource claim status %+v, want a new claim, not %s", w, st, stale[w])
		}
		if _, err := c.client.ResourceV1().ResourceClaims(ns).Get(c.ctx, stale[w], metav1.GetOptions{}); err == nil {
			t.Errorf("%s: the stale claim %s still exists", w, stale[w])
		}
	}
	c.checkNoDoubleBooking()
}

// extendedResourceClasses installs the classes as kubectl apply -k
// manifests/scheduler/extended-resource does: the base classes, then the
// overlay's patch.
func (c *cluster) extendedResourceClasses() {
	c.t.Helper()
	c.deviceClasses()
	c.patchExtendedResourceName()
}

// patchExtendedResourceName applies the extended-resource overlay's
// patch to the installed classes. (Kustomize's own packages cannot be
// linked into this test: they import package plugin, which makes the
// binary resolve go-nvml's symbols at start.)
func (c *cluster) patchExtendedResourceName() {
	c.t.Helper()
	raw, err := os.ReadFile("../../manifests/scheduler/extended-resource/gpu-extended-resource.yaml")
	if err != nil {
		c.t.Fatal(err)
	}
	var patch resourceapi.DeviceClass
	if err := yaml.UnmarshalStrict(raw, &patch); err != nil {
		c.t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"extendedResourceName": patch.Spec.ExtendedResourceName}})
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.client.ResourceV1().DeviceClasses().Patch(c.ctx, patch.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// label sets a label on a node.
func (c *cluster) label(node, key, value string) {
	c.t.Helper()
	nd, err := c.client.CoreV1().Nodes().Get(c.ctx, node, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.Labels[key] = value
	if _, err := c.client.CoreV1().Nodes().Update(c.ctx, nd, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func init() {
	// extCases' names are node and pod names.
	for _, tc := range extCases {
		if strings.ToLower(tc.name) != tc.name {
			panic(fmt.Sprintf("extCase %q: want a lowercase name", tc.name))
		}
	}
}
