package gputopology

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

// placements remembers where the pods behind the learned workload may
// run: their nodeSelector and required node affinity (the way pods ask
// for a node pool, a zone, or a GPU model by its node label), keyed by a
// canonical encoding. Fragmentation then counts a node's free GPUs as
// lost to the requests that may not run there, so unconstrained pods stop
// filling the nodes that constrained ones need. Constraints written as
// device selectors in claims (CEL on productName) are not learned.
type placements struct {
	mu    sync.Mutex
	byKey map[string]nodeaffinity.RequiredNodeAffinity
	// last is the admission of the learner's last build, reused (with
	// its per-node results) while the learner reports the same build.
	last *admission
}

// placementKey is the canonical encoding of the pod's required placement,
// "" when it has none: equal constraints written in another order (terms,
// requirements, values) get the same key.
func placementKey(pod *v1.Pod) string {
	aff := pod.Spec.Affinity
	var required *v1.NodeSelector
	if aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		required = canonicalSelector(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	if len(pod.Spec.NodeSelector) == 0 && required == nil {
		return ""
	}
	// encoding/json sorts map keys.
	key, err := json.Marshal(struct {
		Selector map[string]string `json:"s,omitempty"`
		Required *v1.NodeSelector  `json:"r,omitempty"`
	}{pod.Spec.NodeSelector, required})
	if err != nil {
		return "" // cannot happen for these types; unconstrained is safe
	}
	return string(key)
}

// canonicalSelector sorts a copy's values, requirements and terms.
func canonicalSelector(in *v1.NodeSelector) *v1.NodeSelector {
	out := in.DeepCopy()
	terms := make([]string, 0, len(out.NodeSelectorTerms))
	byTerm := map[string]v1.NodeSelectorTerm{}
	for _, term := range out.NodeSelectorTerms {
		for _, reqs := range [][]v1.NodeSelectorRequirement{term.MatchExpressions, term.MatchFields} {
			for i := range reqs {
				slices.Sort(reqs[i].Values)
			}
			slices.SortFunc(reqs, func(a, b v1.NodeSelectorRequirement) int {
				return strings.Compare(a.Key+"\x00"+string(a.Operator)+"\x00"+strings.Join(a.Values, "\x00"),
					b.Key+"\x00"+string(b.Operator)+"\x00"+strings.Join(b.Values, "\x00"))
			})
		}
		enc, _ := json.Marshal(term)
		terms = append(terms, string(enc))
		byTerm[string(enc)] = term
	}
	slices.Sort(terms)
	terms = slices.Compact(terms)
	out.NodeSelectorTerms = out.NodeSelectorTerms[:0]
	for _, t := range terms {
		out.NodeSelectorTerms = append(out.NodeSelectorTerms, byTerm[t])
	}
	return out
}

// remember records the pod's placement and returns its key.
func (p *placements) remember(pod *v1.Pod) string {
	key := placementKey(pod)
	if key == "" {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byKey[key]; !ok {
		if p.byKey == nil {
			p.byKey = map[string]nodeaffinity.RequiredNodeAffinity{}
		}
		p.byKey[key] = nodeaffinity.GetRequiredNodeAffinity(pod)
	}
	return key
}

// rememberedPlacements bounds the matchers kept: past it, those of keys
// the learner's last build does not report are forgotten. The learner
// remembers at most 4 x learnerClasses keys, so this is reached only
// when it folds keys away.
const rememberedPlacements = 4 * learnerClasses

// admission is the constrained placements of one learner build with
// their shares, and what they exclude per node.
type admission struct {
	where    []topology.Placement // the build it was made for
	matchers []nodeaffinity.RequiredNodeAffinity
	index    map[string]int // key -> matcher
	shares   []float64
	// pressure per matcher: its share of the requests times the fleet's
	// free GPUs over the free GPUs of the nodes it admits (pressure).
	pressure []float64
	perNode  sync.Map // node name -> nodeExclusion
	// stored counts perNode's stores: past maxExclusions it starts
	// afresh, so that the names of nodes long deleted (an autoscaler
	// names each anew) do not pile up while a learner build lasts.
	stored atomic.Int64
}

// maxExclusions bounds the node names an admission remembers.
const maxExclusions = 1 << 16

// nodeExclusion is a node's excluded share and the pressure of the
// placements that admit it, valid for that node object (informers
// replace the object when its labels change). It does not keep the
// object alive: a deleted node's goes with it, not with the admission,
// which lasts until the learner's next build.
type nodeExclusion struct {
	node     weak.Pointer[v1.Node]
	excluded float64
	pressure float64
	admits   []bool // per matcher
}

// fleetGPUs lists the nodes and their whole GPUs (free and all).
type fleetGPUs func() ([]*v1.Node, map[string]*topology.NodeGPUs, error)

// admissionFor prepares the exclusion measure for the learner's
// placements (constrained keys with their shares), and with fleet (nil:
// none) their pressure; nil when there is none. A key whose matcher is
// not remembered (folded away, or learned before a restart of the
// learner's process) excludes nothing.
func (p *placements) admissionFor(where []topology.Placement, fleet fleetGPUs) (*admission, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != nil && sameBuild(p.last.where, where) {
		return p.last, nil
	}
	a := &admission{where: where, index: map[string]int{}}
	used := make(map[string]bool, len(where))
	for _, pl := range where {
		if m, ok := p.byKey[pl.Key]; ok {
			used[pl.Key] = true
			a.index[pl.Key] = len(a.matchers)
			a.matchers = append(a.matchers, m)
			a.shares = append(a.shares, pl.Share)
		}
	}
	if len(p.byKey) > rememberedPlacements {
		for key := range p.byKey {
			if !used[key] {
				delete(p.byKey, key)
			}
		}
	}
	if len(a.matchers) == 0 {
		a = nil
	}
	if a != nil && fleet != nil {
		if err := a.weighPressure(fleet); err != nil {
			return nil, err
		}
	}
	p.last = a
	return a, nil
}

// weighPressure is each placement's pressure on the nodes it admits:
// its share of the requests to come times the free GPUs of the fleet
// (what is left to ask for, if the fleet fills up) over the free GPUs
// it may use. Above 1, its own requests alone would take every free GPU
// it admits; any other request placed there takes a GPU one of them
// will miss.
func (a *admission) weighPressure(fleet fleetGPUs) error {
	nodes, gpus, err := fleet()
	if err != nil {
		return err
	}
	a.pressure = make([]float64, len(a.matchers))
	admitted := make([]float64, len(a.matchers))
	var total float64
	for _, node := range nodes {
		g := gpus[node.Name]
		if g == nil || g.Free == 0 {
			continue
		}
		total += float64(g.Free)
		for i := range a.matchers {
			if ok, err := a.matchers[i].Match(node); ok && err == nil {
				admitted[i] += float64(g.Free)
			}
		}
	}
	for i := range a.matchers {
		if admitted[i] > 0 {
			a.pressure[i] = a.shares[i] * total / admitted[i]
		}
	}
	return nil
}

// sameBuild: the learner hands out the same slice until it rebuilds.
func sameBuild(a, b []topology.Placement) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// excluded is the share of the learned requests whose pods may not run
// on node, computed once per node object and learner build.
func (a *admission) excluded(node *v1.Node) float64 {
	return a.at(node).excluded
}

// contention is the probability (pressure, at most 1) that a GPU taken on
// node by a pod with placement key own is one that requests of other
// placements, which may run on few nodes, will miss.
func (a *admission) contention(node *v1.Node, own string) float64 {
	if a == nil || a.pressure == nil {
		return 0
	}
	e := a.at(node)
	p := e.pressure
	if i, ok := a.index[own]; ok && e.admits[i] {
		p -= a.pressure[i]
	}
	return min(1, max(0, p))
}

// at is the node's exclusion and pressure, computed once per node object
// and learner build.
func (a *admission) at(node *v1.Node) nodeExclusion {
	if a == nil {
		return nodeExclusion{}
	}
	if v, ok := a.perNode.Load(node.Name); ok {
		if e := v.(nodeExclusion); e.node.Value() == node {
			return e
		}
	}
	e := nodeExclusion{node: weak.Make(node), admits: make([]bool, len(a.matchers))}
	for i := range a.matchers {
		// Match errors only on a selector the API server does not
		// admit; such pods run nowhere, so they are excluded here too.
		ok, err := a.matchers[i].Match(node)
		e.admits[i] = ok && err == nil
		switch {
		case !e.admits[i]:
			e.excluded += a.shares[i]
		case a.pressure != nil:
			e.pressure += a.pressure[i]
		}
	}
	if a.stored.Add(1) > maxExclusions {
		a.perNode.Clear()
		a.stored.Store(0)
	}
	a.perNode.Store(node.Name, e)
	return e
}

// fleetGPUs lists the scheduler's nodes and their whole GPUs, free and
// all, on the slices and allocated state of the session.
func (pl *GPUTopology) fleetGPUs(inv *allocator.Inventory, state *allocator.AllocatedState) fleetGPUs {
	return func() ([]*v1.Node, map[string]*topology.NodeGPUs, error) {
		lister := pl.fh.SnapshotSharedLister()
		if lister == nil {
			return nil, nil, nil // no snapshot (a framework built without one): no pressure
		}
		infos, err := lister.NodeInfos().List()
		if err != nil {
			return nil, nil, fmt.Errorf("list nodes: %w", err)
		}
		nodes := make([]*v1.Node, 0, len(infos))
		for _, ni := range infos {
			if n := ni.Node(); n != nil {
				nodes = append(nodes, n)
			}
		}
		return nodes, pl.fleetIndexes.of(inv).count(state), nil
	}
}

// TakenIn reports the devices allocated whole or in shares in state.
func TakenIn(state *allocator.AllocatedState) topology.DeviceTaken {
	taken := takenIDs(state)
	return func(driver, pool, device string) bool {
		return taken(structured.MakeDeviceID(driver, pool, device))
	}
}

// takenIDs is TakenIn by device ID.
func takenIDs(state *allocator.AllocatedState) func(structured.DeviceID) bool {
	shared := make(map[structured.DeviceID]bool, len(state.AllocatedSharedDeviceIDs))
	for id := range state.AllocatedSharedDeviceIDs {
		shared[id.GetDeviceID()] = true
	}
	return func(id structured.DeviceID) bool {
		return state.AllocatedDevices.Has(id) || shared[id]
	}
}
