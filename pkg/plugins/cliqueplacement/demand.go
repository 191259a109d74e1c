package cliqueplacement

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
)

// demand is a lower bound of what a group still needs to be placeable:
// gpus whole GPUs in the domain, of which pods pods take at least
// smallest each, on one node each (a pod's GPUs are on its node).
type demand struct {
	gpus, pods, smallest int
	// local is, per device class of another kind whose devices are on
	// a node (NVIDIA's ComputeDomain channel, one per node), what each
	// of those pods needs of it on its node at least (localdevices.go).
	local map[string]int
}

// places counts the pods of at least d.smallest GPUs the domain's nodes
// can hold, each node at most as many as its other devices allow.
func (d demand) places(dom *domain) int {
	if d.pods == 0 {
		return 0
	}
	n := 0
	for i, f := range dom.nodeFree {
		p := f / d.smallest
		if i < len(dom.nodeCap) {
			p = min(p, dom.nodeCap[i])
		}
		n += p
	}
	return n
}

// groupNeed is the demand of as many pods as the group must still place
// (its gang's minCount less the pods already scheduled, at least one),
// those with the smallest demands. A claim several of its pods share is
// counted for none of them: which of them takes it is not known, and
// counting it per pod would overstate the need.
func (pl *CliquePlacement) groupNeed(pg fwk.PodGroupInfo, scheduled int) demand {
	pods := pg.GetUnscheduledPods()
	if len(pods) == 0 {
		return demand{}
	}
	shared := sharedClaims(pods)
	extended := pl.extendedClaimsOf(pods)
	type podDemand struct {
		gpus  int
		local map[string]int
	}
	demands := make([]podDemand, len(pods))
	for i, p := range pods {
		demands[i] = podDemand{pl.podGPUs(p, shared, extended), pl.podLocal(p, shared)}
	}
	slices.SortStableFunc(demands, func(a, b podDemand) int { return a.gpus - b.gpus })
	k := 1
	if g := pg.GetPodGroup(); g != nil && g.Spec.SchedulingPolicy.Gang != nil {
		k = max(int(g.Spec.SchedulingPolicy.Gang.MinCount)-scheduled, 1)
	}
	var need demand
	for _, d := range demands[:min(k, len(demands))] {
		need.gpus += d.gpus
		if d.gpus > 0 {
			need.pods++
			if need.smallest == 0 {
				need.smallest = d.gpus
			}
		}
	}
	// Any of the pods with GPUs may be among those placed: each needs at
	// least the least any of them asks of the other devices.
	var locals []map[string]int
	for _, d := range demands {
		if d.gpus > 0 {
			locals = append(locals, d.local)
		}
	}
	need.local = leastOfEach(locals)
	return need
}

// unallocatedClaims are the pod's claims the plugin can read, not yet
// allocated, less those named in skip.
func (pl *CliquePlacement) unallocatedClaims(pod *v1.Pod, skip map[string]bool) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, name := range claimNames(pod) {
		if skip[name] {
			continue
		}
		if claim, err := pl.draManager.ResourceClaims().Get(pod.Namespace, name); err == nil && claim.Status.Allocation == nil {
			out = append(out, claim)
		}
	}
	return out
}

// sharedClaims are the names of the claims two or more of the pods use.
func sharedClaims(pods []*v1.Pod) map[string]bool {
	users := map[string]int{}
	for _, p := range pods {
		for _, name := range claimNames(p) {
			users[name]++
		}
	}
	shared := map[string]bool{}
	for name, n := range users {
		if n > 1 {
			shared[name] = true
		}
	}
	return shared
}

// claimNames are the names of the pod's claims that exist.
func claimNames(pod *v1.Pod) []string {
	var out []string
	for i := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil {
			out = append(out, *name)
		}
	}
	return out
}

// podGPUs is a lower bound of the whole GPUs a pod still needs: the
// counts of its unallocated claims' requests of a GPU class (the
// smallest alternative of a firstAvailable request, nothing when one of
// them is of another class), and its extended resources that a GPU class
// serves, unless its claim for them in extended (by pod UID) is
// allocated already. Claims named in skip, and what the plugin cannot
// read, count as nothing, so that an estimate never hides a clique that
// could hold the group.
func (pl *CliquePlacement) podGPUs(pod *v1.Pod, skip map[string]bool, extended map[types.UID][]*resourceapi.ResourceClaim) int {
	n := 0
	for _, claim := range pl.unallocatedClaims(pod, skip) {
		for _, r := range claim.Spec.Devices.Requests {
			n += pl.requestGPUs(r)
		}
	}
	// A pod's extended-resource claim allocated already was left by an
	// attempt that did not bind (a leader that died in PreBind): its
	// devices are not free either, so counting both would hide the
	// domain it is in. As with the pod's other allocated claims, the
	// group is tried, and GPUTopology deletes the claim when the pod does
	// not fit.
	if c := gputopology.ExtendedClaimOf(pod, extended[pod.UID]); c != nil && c.Status.Allocation != nil {
		return n
	}
	return n + pl.extendedGPUs(pod)
}

// extendedClaimsOf lists the cluster's claims once for the group, when
// some of its pods ask for extended resources, by the UID of the pod
// that controls them: the candidates for each pod's extended-resource
// claim (gputopology.ExtendedClaimOf tells which).
func (pl *CliquePlacement) extendedClaimsOf(pods []*v1.Pod) map[types.UID][]*resourceapi.ResourceClaim {
	if !slices.ContainsFunc(pods, func(p *v1.Pod) bool { return pl.extendedGPUs(p) > 0 }) {
		return nil
	}
	claims, err := pl.draManager.ResourceClaims().List()
	if err != nil {
		return nil
	}
	out := map[types.UID][]*resourceapi.ResourceClaim{}
	for _, c := range claims {
		if o := metav1.GetControllerOfNoCopy(c); o != nil {
			out[o.UID] = append(out[o.UID], c)
		}
	}
	return out
}

// requestGPUs: an admin-access request takes devices in use too (the
// allocator does not count them as allocated), so it needs none free.
func (pl *CliquePlacement) requestGPUs(r resourceapi.DeviceRequest) int {
	if r.Exactly != nil {
		if ptr.Deref(r.Exactly.AdminAccess, false) {
			return 0
		}
		return pl.exactGPUs(r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count)
	}
	least := -1
	for _, sub := range r.FirstAvailable {
		n := pl.exactGPUs(sub.DeviceClassName, sub.AllocationMode, sub.Count)
		if least < 0 || n < least {
			least = n
		}
	}
	return max(least, 0)
}

func (pl *CliquePlacement) exactGPUs(class string, mode resourceapi.DeviceAllocationMode, count int64) int {
	if !pl.gpuClasses[class] || (mode != "" && mode != resourceapi.DeviceAllocationModeExactCount) {
		return 0
	}
	return int(max(count, 1))
}

// extendedGPUs counts the pod's extended resources (nvidia.com/gpu: N)
// that a GPU class names, with kube's rules for init and sidecar
// containers.
func (pl *CliquePlacement) extendedGPUs(pod *v1.Pod) int {
	resolver := pl.draManager.DeviceClassResolver()
	if resolver == nil || !pl.fts.EnableDRAExtendedResource {
		return 0
	}
	n := 0
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if name == v1.ResourceCPU || name == v1.ResourceMemory || name == v1.ResourceEphemeralStorage {
			continue
		}
		if c := resolver.GetDeviceClass(name); c != nil && pl.gpuClasses[c.Name] {
			n += int(q.Value())
		}
	}
	return n
}
