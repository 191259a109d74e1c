package gputopology

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/allocator"
)

// DRA extended resources (KEP-5004): a pod that asks for
// resources.limits {nvidia.com/gpu: 2}, where a DeviceClass names that
// resource (spec.extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>), gets its devices from DRA
// on nodes whose device plugin does not advertise the resource. As the
// in-tree plugin does, the scheduler makes one claim for all of them:
// in memory until PreBind, which creates it (owned by the pod, annotated
// as an extended-resource claim) with the allocation, and records in the
// pod's status which container's resource maps to which request. The
// devices are GPUTopology's choice, as for any claim.

// extendedClaimInMemory names the claim before PreBind creates it; not a
// valid object name, so it never clashes with a real claim.
const extendedClaimInMemory = "<extended-resources>"

// extendedState is a pod's DRA extended resources for one cycle.
type extendedState struct {
	// classOf maps each DRA extended resource the pod asks for to its
	// DeviceClass; all lists them sorted, allKey names that set.
	classOf map[v1.ResourceName]string
	all     []v1.ResourceName
	allKey  string
	// unbacked are the pod's other extended resources, which no
	// DeviceClass maps: only a device plugin can serve them.
	unbacked []v1.ResourceName
	// claim is the in-memory claim (no requests; each node gets a copy
	// with its own), or a claim left by an earlier cycle, which is stale:
	// PostFilter deletes it and the pod tries again.
	claim *resourceapi.ResourceClaim
	// variants by the resources DRA serves on a node ("" for none).
	variants map[string]*extendedVariant
	// created is the claim PreBind wrote, for Unreserve to delete.
	created *resourceapi.ResourceClaim
}

// extendedVariant is what nodes on which DRA serves the same resources
// share: the claim's requests and mappings, and the session that
// allocates it with the pod's other claims.
type extendedVariant struct {
	claim    *resourceapi.ResourceClaim // nil: the device plugin serves them all
	mappings []v1.ContainerExtendedResourceRequest
	session  *allocator.Session
	err      error

	// inPodTerms rewrites the engine's words for describe, made once:
	// most nodes of a full fleet refuse the pod, each with a message.
	inPodTermsOnce sync.Once
	inPodTerms     *strings.Replacer
}

func (e *extendedState) stale() bool { return e.claim.Name != extendedClaimInMemory }

// describe puts what the engine says of the in-memory claim's requests in
// the pod's terms: "claim ns/<extended-resources>, request
// container-1-request-0: needs 8" becomes "example.com/gpu of container
// main: needs 8". That claim does not exist yet, and its request names
// are made up by the scheduler.
func (v *extendedVariant) describe(msg, namespace string) string {
	if v.claim == nil {
		return msg
	}
	v.inPodTermsOnce.Do(func() {
		prefix := fmt.Sprintf("claim %s/%s, request ", namespace, extendedClaimInMemory)
		containers := map[string][]string{}
		resources := map[string]string{}
		for _, m := range v.mappings {
			containers[m.RequestName] = append(containers[m.RequestName], m.ContainerName)
			resources[m.RequestName] = m.ResourceName
		}
		var pairs []string
		for _, req := range slices.Sorted(maps.Keys(containers)) {
			names := containers[req]
			word := "container"
			if len(names) > 1 {
				word = "containers"
			}
			pairs = append(pairs, prefix+req+":", fmt.Sprintf("%s of %s %s:", resources[req], word, strings.Join(names, ", ")))
		}
		v.inPodTerms = strings.NewReplacer(pairs...)
	})
	return v.inPodTerms.Replace(msg)
}

// staleMapping names the claim the pod's status maps its extended
// resources to when that is not this cycle's claim: one an earlier
// attempt created and Unreserve or PostFilter deleted. The API server
// keeps the field when an update clears it, and the kubelet prepares the
// claim it names, so a binding that writes no claim (the device plugin
// serves every resource) would leave the pod unable to start. A binding
// where DRA serves them writes the new name over it.
func (e *extendedState) staleMapping(pod *v1.Pod) string {
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil || st.ResourceClaimName == e.claim.Name {
		return ""
	}
	return st.ResourceClaimName
}

// draExtendedResources returns the extended resources the pod asks for
// that a DeviceClass maps to DRA, with their class, and, sorted, the
// others no class maps (unbacked); nil when none or with the
// DRAExtendedResource gate off (NodeResourcesFit then counts them as
// device plugin resources).
func (pl *GPUTopology) draExtendedResources(pod *v1.Pod) (classOf map[v1.ResourceName]string, unbacked []v1.ResourceName) {
	if !pl.fts.EnableDRAExtendedResource {
		return nil, nil
	}
	resolver := pl.draManager.DeviceClassResolver()
	if resolver == nil {
		return nil, nil
	}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if q.IsZero() || !schedutil.IsDRAExtendedResourceName(name) {
			continue
		}
		class := resolver.GetDeviceClass(name)
		if class == nil {
			unbacked = append(unbacked, name)
			continue
		}
		if classOf == nil {
			classOf = map[v1.ResourceName]string{}
		}
		classOf[name] = class.Name
	}
	slices.Sort(unbacked)
	return classOf, unbacked
}

// preFilterExtended finds the claim an earlier cycle left for the pod,
// or makes the in-memory one.
func (pl *GPUTopology) preFilterExtended(pod *v1.Pod, classOf map[v1.ResourceName]string, unbacked []v1.ResourceName) (*extendedState, error) {
	if len(classOf) == 0 {
		return nil, nil
	}
	claims, err := pl.draManager.ResourceClaims().List()
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	names := slices.Sorted(maps.Keys(classOf))
	e := &extendedState{classOf: classOf, all: names, allKey: variantKey(names), unbacked: unbacked, variants: map[string]*extendedVariant{}}
	if old := ExtendedClaimOf(pod, claims); old != nil {
		e.claim = old
		return e, nil
	}
	e.claim = &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			Name:         extendedClaimInMemory,
			GenerateName: pod.Name + "-extended-resources-",
			// In flight under this UID until PreBind creates the claim.
			UID: uuid.NewUUID(),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
			}},
			Annotations: map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		},
	}
	return e, nil
}

// unservedOn names an extended resource of the pod that the node cannot
// serve: one no DeviceClass maps and the node does not advertise. As the
// in-tree plugin does, this is checked here and not only left to
// NodeResourcesFit, which a profile may tell to ignore the resource.
func (e *extendedState) unservedOn(nodeInfo fwk.NodeInfo) v1.ResourceName {
	scalar := nodeInfo.GetAllocatable().GetScalarResources()
	for _, name := range e.unbacked {
		if _, ok := scalar[name]; !ok {
			return name
		}
	}
	return ""
}

// ExtendedClaimOf is the extended-resource claim the pod controls (one an
// earlier attempt created, left when the pod did not bind). As
// upstream, it looks through every claim in the cluster, once per
// scheduling attempt of such a pod: the owner's UID, which tells almost
// every claim apart at its first bytes, is compared before the annotation
// is looked up (that lookup hashes a 45-byte key: in upstream's
// 2,000-pod extended-resource workload the scan was 27% of the
// scheduler's CPU).
func ExtendedClaimOf(pod *v1.Pod, claims []*resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	for _, c := range claims {
		for _, o := range c.OwnerReferences {
			if o.UID == pod.UID && o.Name == pod.Name && ptr.Deref(o.Controller, false) &&
				c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
				return c
			}
		}
	}
	return nil
}

// viaDRA names, sorted, the pod's DRA extended resources that DRA must
// serve on the node (those its device plugin does not advertise), and
// that set's variant key. On most nodes that is all of them, at no cost:
// Filter asks on every node.
func (e *extendedState) viaDRA(nodeInfo fwk.NodeInfo) ([]v1.ResourceName, string) {
	scalar := nodeInfo.GetAllocatable().GetScalarResources()
	if !slices.ContainsFunc(e.all, func(n v1.ResourceName) bool { return scalar[n] != 0 }) {
		return e.all, e.allKey
	}
	var out []v1.ResourceName
	for _, name := range e.all {
		if scalar[name] == 0 {
			out = append(out, name)
		}
	}
	return out, variantKey(out)
}

// variantKey names the set of resources DRA serves.
func variantKey(names []v1.ResourceName) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = string(n)
	}
	return strings.Join(parts, ",")
}

// variantOn returns the variant for the resources DRA serves on the
// node, built the first time a node needs it: nodes whose device plugin
// advertises some of the resources need a claim without them.
func (pl *GPUTopology) variantOn(s *stateData, pod *v1.Pod, nodeInfo fwk.NodeInfo) *extendedVariant {
	names, key := s.ext.viaDRA(nodeInfo)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.ext.variants[key]; v != nil {
		return v
	}
	v, _ := pl.newVariant(s, pod, names)
	s.ext.variants[key] = v
	return v
}

// newVariant builds the claim for the resources DRA serves (names) from
// the pod's containers, and the session that allocates it with the
// pod's claims (the pod's own session when DRA serves none), with the
// placements of that session's workload.
func (pl *GPUTopology) newVariant(s *stateData, pod *v1.Pod, names []v1.ResourceName) (*extendedVariant, *admission) {
	if len(names) == 0 {
		return &extendedVariant{session: s.session}, s.admission
	}
	classOf := make(map[v1.ResourceName]string, len(names))
	for _, n := range names {
		classOf[n] = s.ext.classOf[n]
	}
	claim := s.ext.claim.DeepCopy()
	requests, mappings := extendedRequests(pod, classOf)
	claim.Spec.Devices.Requests = requests
	v := &extendedVariant{claim: claim, mappings: mappings}
	var adm *admission
	v.session, adm, v.err = pl.newSession(s.allocated, append(s.toAllocateClaims(), claim))
	return v, adm
}
