package gputopology

import (
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// stateKey is where the plugin keeps its per-cycle state.
const stateKey fwk.StateKey = Name

// stateData is one scheduling cycle of one pod.
type stateData struct {
	// claims of the pod, in pod.spec.resourceClaims order.
	claims []*resourceapi.ResourceClaim
	// bindTo: per claim, the reservedFor entry PreBind writes (the pod,
	// or its PodGroup: groupclaims.go).
	bindTo []resourceapi.ResourceClaimConsumerReference
	// ext: the pod's DRA extended resources and their claim; nil when
	// it asks for none.
	ext *extendedState
	// toAllocate indexes claims that need an allocation.
	toAllocate []int
	// availableOn is, per claim, the node selector of an existing
	// allocation (nil when not allocated or usable anywhere).
	availableOn []*nodeaffinity.NodeSelector
	// shared: claims allocated in flight by another pod of the same
	// pod-group cycle (podgroup.go), by index, with that allocation.
	shared map[int]*resourceapi.AllocationResult
	// allocated is the scheduler's ledger as PreFilter read it (nil when
	// nothing is to be allocated); sessions built later in the cycle use
	// it too.
	allocated *allocator.AllocatedState
	// session is the engine's allocation problem for this pod, nil when
	// every claim is already allocated.
	session *allocator.Session
	// podHost is the CPU and memory the pod asks for besides devices.
	podHost topology.Host
	// admission: where the classes of the session's workload may run.
	admission *admission
	// placementKey is the pod's own required placement (placementKey).
	placementKey string
	// measureOnly: the pod asks for no devices; the session only
	// measures fragmentation and never refuses a node.
	measureOnly bool
	// signalled: the claims whose in-flight allocation (or share of one)
	// this pod's Reserve recorded; Unreserve releases those only. The
	// framework unreserves a pod in every plugin when any Reserve fails,
	// also where this one never ran, and the claims of a pod-group
	// cycle are in flight for other pods too.
	signalled []types.UID
	// learnInPreBind: Reserve ran in a pod-group cycle, which tries the
	// group in several placements and reverts each, so the learner
	// counts the pod once, in PreBind, once the group is placed.
	learnInPreBind bool
	// learned is what Reserve (or PreBind) counted in the learned
	// workload, for Unreserve to take back while PreBind has written
	// none of the pod's allocations (its retry counts it anew); nil when
	// nothing is to be taken back.
	learned *learnedRequest

	mu sync.Mutex
	// results per node name, written by Filter, read by Score, Reserve.
	results map[string]*allocator.Result
	// variants: per node name, the extended-resource claim allocated
	// there with the pod's claims (nil or without claim: none).
	variants map[string]*extendedVariant
	// unavailable claims (allocated elsewhere, binding failed or timed
	// out), for PostFilter to deallocate.
	unavailable map[int]bool
}

// Clone shares the state: it is only written in PreFilter and under mu.
func (d *stateData) Clone() fwk.StateData { return d }

func getState(cs fwk.CycleState) (*stateData, error) {
	v, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("read %s state: %w", Name, err)
	}
	s, ok := v.(*stateData)
	if !ok {
		return nil, fmt.Errorf("%s state has type %T, want *stateData", Name, v)
	}
	return s, nil
}

func (d *stateData) markUnavailable(claim int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unavailable == nil {
		d.unavailable = make(map[int]bool)
	}
	d.unavailable[claim] = true
}

// unavailableClaims lists the claims Filter found unusable where they are
// allocated, by index.
func (d *stateData) unavailableClaims() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int, 0, len(d.unavailable))
	for i := range d.unavailable {
		out = append(out, i)
	}
	return out
}

func (d *stateData) result(node string) *allocator.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.results[node]
}

// toAllocateClaims are the pod's claims that need an allocation.
func (d *stateData) toAllocateClaims() []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(d.toAllocate))
	for k, i := range d.toAllocate {
		out[k] = d.claims[i]
	}
	return out
}

// extendedClaimOn is the extended-resource claim allocated on node with
// the pod's claims (its allocation follows theirs in the result); nil
// when there is none there.
func (d *stateData) extendedClaimOn(node string) *extendedVariant {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.variants[node]; v != nil && v.claim != nil {
		return v
	}
	return nil
}

// NodeQuality returns the quality of the allocation Filter chose for the
// pod on node, for the other gputopo score plugins. ok is false when the
// pod needed no allocation or the node was not feasible.
func NodeQuality(cs fwk.CycleState, node string) (allocator.Quality, bool) {
	s, err := getState(cs)
	if err != nil {
		return allocator.Quality{}, false
	}
	r := s.result(node)
	if r == nil {
		return allocator.Quality{}, false
	}
	return r.Quality, true
}
