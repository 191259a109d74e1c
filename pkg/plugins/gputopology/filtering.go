package gputopology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// PreFilter reads the pod's claims, checks what no node can fix, and
// builds the engine session that Filter runs on every node.
func (pl *GPUTopology) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if pl.resizeDeferred(pod) {
		cs.Write(stateKey, &stateData{})
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// Until the pod's claims are read, as one without any: see
	// recordInGroup.
	if err := recordInGroup(cs, pod, &stateData{}); err != nil {
		return nil, fwk.AsStatus(err)
	}
	classOf, unbacked := pl.draExtendedResources(pod)
	// Reserve and PreBind run for every pod, Skip or not: they find an
	// empty state for pods without claims.
	if len(pod.Spec.ResourceClaims) == 0 && len(classOf) == 0 {
		return pl.preFilterWithoutDevices(ctx, cs, pod)
	}
	claims, err := pl.podClaims(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	ext, err := pl.preFilterExtended(pod, classOf, unbacked)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(claims) == 0 && ext == nil {
		cs.Write(stateKey, &stateData{})
		return nil, fwk.NewStatus(fwk.Skip)
	}
	bindTo, err := pl.claimBindings(pod, claims)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	s := &stateData{
		claims:      claims,
		bindTo:      bindTo,
		ext:         ext,
		availableOn: make([]*nodeaffinity.NodeSelector, len(claims)),
		results:     make(map[string]*allocator.Result),
		variants:    make(map[string]*extendedVariant),
	}
	cs.Write(stateKey, s)
	if err := recordInGroup(cs, pod, s); err != nil {
		return nil, fwk.AsStatus(err)
	}

	var toAllocate []*resourceapi.ResourceClaim
	for i, claim := range claims {
		if claim.Status.Allocation != nil {
			if !resourceclaim.CanBeReserved(claim) && !pl.reservedFor(pod, claim) {
				return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s is in use by %d other consumers, the maximum", klog.KObj(claim), len(claim.Status.ReservedFor)))
			}
			if ns := claim.Status.Allocation.NodeSelector; ns != nil {
				sel, err := nodeaffinity.NewNodeSelector(ns)
				if err != nil {
					return nil, fwk.AsStatus(fmt.Errorf("resourceclaim %s: status.allocation.nodeSelector: %w", klog.KObj(claim), err))
				}
				s.availableOn[i] = sel
			}
			continue
		}
		// Allocated in flight by another pod of this pod-group cycle: use
		// that allocation (podgroup.go).
		shared, err := pl.sharedPending(cs, claim)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		if shared != nil {
			if err := s.useShared(i, shared); err != nil {
				return nil, fwk.AsStatus(fmt.Errorf("resourceclaim %s: %w", klog.KObj(claim), err))
			}
			continue
		}
		// As upstream: wait for the other pod's allocation to be written.
		// Unresolvable, so that preemption does not evict pods for it.
		if pl.draManager.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s is being allocated for another pod", klog.KObj(claim)))
		}
		if status := pl.checkClasses(claim); status != nil {
			return nil, status
		}
		if status := pl.checkDrivers(claim); status != nil {
			return nil, status
		}
		s.toAllocate = append(s.toAllocate, i)
		toAllocate = append(toAllocate, claim)
	}
	s.podHost, s.placementKey = podHost(pod), placementKey(pod)
	if len(toAllocate) > 0 || ext != nil {
		// Read once per cycle, as upstream's PreFilter reads it: the
		// pod's session and every extended-resource variant built later
		// in Filter allocate against the same view of the ledger.
		if s.allocated, err = pl.allocatedState(ctx); err != nil {
			return nil, fwk.AsStatus(err)
		}
	}
	if len(toAllocate) > 0 {
		session, adm, err := pl.newSession(s.allocated, toAllocate)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		s.session, s.admission = session, adm
	}
	if ext != nil && !ext.stale() {
		// The claim of nodes where DRA serves every resource, which is
		// most nodes; other variants are built when a node needs them.
		v, adm := pl.newVariant(s, pod, ext.all)
		if v.err != nil {
			return nil, fwk.AsStatus(v.err)
		}
		s.admission = adm
		ext.variants[ext.allKey] = v
	}
	logger.V(5).Info("Prepared allocation", "pod", klog.KObj(pod), "claims", klog.KObjSlice(toAllocate), "extendedResources", classOf)
	return nil, nil
}

// preFilterWithoutDevices prepares a pod that asks for no devices. With
// packing on, its CPU and memory still decide which GPUs stay usable (a
// node whose last cores go to a CPU-only pod strands its free GPUs), so
// Filter measures every node's fragmentation with and without the pod
// through a session without claims; the pod is never refused for it.
// Without any ResourceSlice there is nothing to measure (every node would
// score the same), so the pod is skipped as the in-tree plugin skips it;
// so it is when the devices cannot be read: the pod needs none, and the
// in-tree plugin would place it.
func (pl *GPUTopology) preFilterWithoutDevices(ctx context.Context, cs fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status) {
	skip := func(err error) (*fwk.PreFilterResult, *fwk.Status) {
		if err != nil {
			klog.FromContext(ctx).Error(err, "Pod without claims placed without measuring fragmentation", "pod", klog.KObj(pod))
		}
		cs.Write(stateKey, &stateData{})
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !pl.args.Packing.Enabled {
		return skip(nil)
	}
	inv, err := pl.inventory()
	if err != nil || len(inv.Slices()) == 0 {
		return skip(err)
	}
	state, err := pl.allocatedState(ctx)
	if err != nil {
		return skip(err)
	}
	session, adm, err := pl.newSessionOn(inv, state, nil)
	if err != nil {
		return skip(err)
	}
	cs.Write(stateKey, &stateData{
		session:      session,
		admission:    adm,
		placementKey: placementKey(pod),
		podHost:      podHost(pod),
		results:      make(map[string]*allocator.Result),
		measureOnly:  true,
	})
	return nil, nil
}

// podHost is the CPU and memory the pod asks for.
func podHost(pod *v1.Pod) topology.Host {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return topology.Host{CPUMilli: req.Cpu().MilliValue(), MemoryMiB: req.Memory().Value() >> 20}
}

// checkClasses rejects claims whose device classes do not exist, with a
// message naming claim, request and class (a class created later requeues
// the pod), and, as upstream, claims with subrequests while
// DRAPrioritizedList is off: the engine would refuse them on every node
// as an error, which skips PostFilter and retries the pod in a loop.
func (pl *GPUTopology) checkClasses(claim *resourceapi.ResourceClaim) *fwk.Status {
	check := func(request, class string) *fwk.Status {
		if _, err := pl.draManager.DeviceClasses().Get(class); err != nil {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s, request %s: device class %s does not exist", klog.KObj(claim), request, class))
		}
		return nil
	}
	for _, r := range claim.Spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			if st := check(r.Name, r.Exactly.DeviceClassName); st != nil {
				return st
			}
		case len(r.FirstAvailable) > 0:
			if !pl.fts.EnableDRAPrioritizedList {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s, request %s: has subrequests, but the DRAPrioritizedList feature is disabled", klog.KObj(claim), r.Name))
			}
			for _, sub := range r.FirstAvailable {
				if st := check(r.Name+"/"+sub.Name, sub.DeviceClassName); st != nil {
					return st
				}
			}
		default:
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s, request %s: unknown request type", klog.KObj(claim), r.Name))
		}
	}
	return nil
}

// resizeDeferred: the pod runs already and is scheduled again only to
// find room for a resize (InPlacePodVerticalScalingSchedulerPreemption).
// Its claims are allocated and in use, so, as upstream, nothing here
// touches them: PostFilter would otherwise free or delete them under the
// running containers.
func (pl *GPUTopology) resizeDeferred(pod *v1.Pod) bool {
	return pl.fts.EnableInPlacePodVerticalScalingSchedulerPreemption && resourcehelper.IsPodResizeDeferred(pod)
}

// PreFilterExtensions returns nil: there are none.
func (pl *GPUTopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter allocates the pod's claims on one node and remembers the result.
func (pl *GPUTopology) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if pl.resizeDeferred(pod) {
		return nil
	}
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	logger := klog.FromContext(ctx)
	if s.ext != nil && s.ext.stale() {
		// As upstream: an earlier attempt's claim is not reused (its
		// allocation may no longer fit); PostFilter deletes it. No node
		// can take it meanwhile, so preemption is not tried.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s for the pod's extended resources is left from an earlier attempt", klog.KObj(s.ext.claim)))
	}
	if s.ext != nil {
		if name := s.ext.unservedOn(nodeInfo); name != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("cannot fit extended resource %s: the node does not advertise it and no DeviceClass maps it", name))
		}
	}
	// As upstream: every claim unusable here is found, but marked for
	// PostFilter to free only if the pod's other claims can be allocated
	// on the node (it would not fit here anyway otherwise).
	var unavailable []int
	var why string
	for i, claim := range s.claims {
		if reason := pl.unavailableOn(node, s.availableOn[i], claim); reason != "" {
			unavailable = append(unavailable, i)
			why = cmp.Or(why, reason)
		}
	}
	unusable := func() *fwk.Status {
		for _, i := range unavailable {
			s.markUnavailable(i)
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	session := s.session
	var variant *extendedVariant
	if s.ext != nil {
		variant = pl.variantOn(s, pod, nodeInfo)
		if variant.err != nil {
			return fwk.AsStatus(variant.err)
		}
		if stale := s.ext.staleMapping(pod); variant.claim == nil && stale != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("the node's device plugin serves the pod's extended resources, but the pod's status maps them to resourceclaim %s of an earlier attempt, which the kubelet would look for: only a node where DRA serves them replaces it", klog.KRef(pod.Namespace, stale)))
		}
		session = variant.session
	}
	if session == nil {
		if len(unavailable) > 0 {
			return unusable()
		}
		return nil
	}
	// Only allocations get a deadline and count in the allocation latency
	// metric: a pod without claims is only measured, which searches
	// nothing, and its measurements on every node would drown the
	// allocations there (and cost as much as the measurement).
	actx := ctx
	var start time.Time
	if !s.measureOnly {
		start = time.Now()
		if d := pl.args.FilterTimeout.Duration; d > 0 {
			actx = allocator.WithDeadline(ctx, start.Add(d))
		}
	}
	// A node that reports no allocatable CPU or memory (nil host) is
	// measured without them, and without learned placements too.
	host := hostUse(nodeInfo, s.podHost)
	if host != nil {
		host.Excluded = s.admission.excluded(node)
		host.Contention = s.admission.contention(node, s.placementKey)
	}
	res, err := session.Allocate(actx, node, host)
	if !s.measureOnly {
		observeAllocation(start, err)
	}
	switch {
	case err == nil:
	case s.measureOnly:
		// Only a measurement: the pod needs no devices from this node.
		logger.V(5).Info("Fragmentation not measured", "pod", klog.KObj(pod), "node", klog.KObj(node), "err", err)
		return nil
	case allocator.IsNodeLevel(err):
		// Unresolvable as upstream: evicting pods does not free devices
		// for the preemptor in 1.37, so preemption must not try.
		// The status says what is wrong, the same on every node; the log
		// names the pool. Looked for only when logged: most nodes of a
		// full fleet fail here for every pod.
		if invalid := (*allocator.InvalidPoolError)(nil); logger.V(3).Enabled() && errors.As(err, &invalid) {
			logger.V(3).Info("Invalid resource pool", "pod", klog.KObj(pod), "node", klog.KObj(node), "pool", invalid.Pool, "reason", invalid.Detail)
		}
		msg := trimSentinel(err)
		if variant != nil {
			msg = variant.describe(msg, pod.Namespace)
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return fwk.AsStatus(fmt.Errorf("node %s: timed out after %s allocating devices", node.Name, pl.args.FilterTimeout.Duration))
	case ctx.Err() != nil:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("stopped allocating devices: %v", context.Cause(ctx)))
	default:
		logger.V(3).Info("Claims cannot be allocated", "pod", klog.KObj(pod), "node", klog.KObj(node), "err", err)
		return fwk.AsStatus(err)
	}
	if len(unavailable) > 0 {
		return unusable()
	}
	s.mu.Lock()
	s.results[node.Name] = res
	if variant != nil {
		s.variants[node.Name] = variant
	}
	s.mu.Unlock()
	return nil
}

// hostUse is the node's CPU and memory left before the pod, for packing
// that does not strand GPUs behind exhausted CPU. A node that reports no
// allocatable CPU or memory is not judged by them (nil).
func hostUse(nodeInfo fwk.NodeInfo, pod topology.Host) *allocator.HostUse {
	alloc, used := nodeInfo.GetAllocatable(), nodeInfo.GetRequested()
	if alloc.GetMilliCPU() == 0 || alloc.GetMemory() == 0 {
		return nil
	}
	return &allocator.HostUse{
		Free: topology.Host{CPUMilli: alloc.GetMilliCPU() - used.GetMilliCPU(), MemoryMiB: (alloc.GetMemory() - used.GetMemory()) >> 20},
		Pod:  pod,
	}
}

// trimSentinel drops the "unsatisfiable: " prefix from the engine's error
// for a message a user reads.
func trimSentinel(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{allocator.ErrUnsatisfiable, allocator.ErrInvalidPool} {
		if p := sentinel.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
			if sentinel == allocator.ErrInvalidPool {
				return msg
			}
			return msg[len(p):]
		}
	}
	return msg
}

// PostFilter deallocates a claim that is allocated on nodes where the pod
// cannot run and that no other pod uses, so that the next attempt can
// allocate it elsewhere (upstream does the same).
func (pl *GPUTopology) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if pl.resizeDeferred(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	s, err := getState(cs)
	if errors.Is(err, fwk.ErrNotFound) {
		// PreFilter rejected the pod before it read its claims (one is
		// missing, say): nothing to free. An error here would also end
		// PostFilter before DefaultPreemption, which comes after.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	_, status := pl.deallocatePodClaims(ctx, pod, s, nil)
	return nil, status
}

// deallocatePodClaims frees one claim of the pod that no node can use
// where it is allocated and that nobody else holds, or deletes the pod's
// stale extended-resource claim; found reports whether there was one. A
// claim in freed (PodGroupPostFilter's: freed for another pod of the
// group, from the same read) counts as found and is not written again.
func (pl *GPUTopology) deallocatePodClaims(ctx context.Context, pod *v1.Pod, s *stateData, freed map[types.UID]bool) (found bool, status *fwk.Status) {
	for _, i := range s.unavailableClaims() {
		claim := s.claims[i]
		if claim.Status.Allocation == nil {
			continue // allocated in flight by another pod of its group, not written
		}
		if freed[claim.UID] {
			// Shared with a pod of the group whose turn freed it: a second
			// write from the same read would conflict. The pod's other
			// claims may still need freeing.
			found = true
			continue
		}
		if FreeableFor(claim, func(uid types.UID) bool { return uid == pod.UID }) {
			klog.FromContext(ctx).V(4).Info("Deallocating claim", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
			if err := pl.deallocate(ctx, claim); err != nil {
				return true, fwk.AsStatus(err)
			}
			if freed != nil {
				freed[claim.UID] = true
			}
			return true, fwk.NewStatus(fwk.Unschedulable, "deallocation of ResourceClaim completed")
		}
	}
	if found {
		return true, fwk.NewStatus(fwk.Unschedulable, "deallocation of ResourceClaim completed")
	}
	if s.ext != nil && s.ext.stale() {
		if err := pl.deleteClaim(ctx, s.ext.claim); err != nil {
			return true, fwk.AsStatus(fmt.Errorf("delete resourceclaim %s left from an earlier attempt: %w", klog.KObj(s.ext.claim), err))
		}
		return true, fwk.NewStatus(fwk.Unschedulable, "deletion of ResourceClaim completed")
	}
	return false, fwk.NewStatus(fwk.Unschedulable)
}

// FreeableFor reports whether the claim may be freed for its consumer
// when that cannot use it where it is allocated: reserved for nothing,
// or for the consumer alone (consumer says whether a UID is one), as
// upstream frees claims. GPUCliquePlacement asks it too, to know which
// claims a failed trial frees.
func FreeableFor(claim *resourceapi.ResourceClaim, consumer func(types.UID) bool) bool {
	held := claim.Status.ReservedFor
	return len(held) == 0 || len(held) == 1 && consumer(held[0].UID)
}

// deallocate clears the claim's allocation, reservations and device
// status in the API server, so that it is allocated anew.
func (pl *GPUTopology) deallocate(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	claim = claim.DeepCopy()
	claim.Status.ReservedFor, claim.Status.Allocation, claim.Status.Devices = nil, nil, nil
	if _, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("deallocate resourceclaim %s: %w", klog.KObj(claim), err)
	}
	return nil
}
