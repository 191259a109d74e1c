package gputopology

import (
	"encoding/json"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gputopo/gputopo/pkg/topology"
)

// placements remembers where the pods behind the learned workload may
// run: their nodeSelector and required node affinity (how pods ask for a
// GPU model, a zone or a pool of nodes), keyed by a canonical encoding.
// Fragmentation then counts a node's free GPUs as lost to the requests
// that may not run there, so unconstrained pods stop filling the nodes
// that constrained ones need.
type placements struct {
	mu    sync.Mutex
	byKey map[string]nodeaffinity.RequiredNodeAffinity
}

// placementKey is the canonical encoding of the pod's required placement,
// "" when it has none.
func placementKey(pod *v1.Pod) string {
	aff := pod.Spec.Affinity
	var required *v1.NodeSelector
	if aff != nil && aff.NodeAffinity != nil {
		required = aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if len(pod.Spec.NodeSelector) == 0 && required == nil {
		return ""
	}
	// encoding/json sorts map keys: equal constraints encode equally.
	key, err := json.Marshal(struct {
		Selector map[string]string `json:"s,omitempty"`
		Required *v1.NodeSelector  `json:"r,omitempty"`
	}{pod.Spec.NodeSelector, required})
	if err != nil {
		return "" // cannot happen for these types; unconstrained is safe
	}
	return string(key)
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

// rememberedPlacements bounds the placements kept: past it, those the
// learner no longer reports are forgotten. It is well above what the
// learner keeps, so that a key observed since the learner's last build
// is usually still here when a build brings it in.
const rememberedPlacements = 4 * learnerClasses

// admission is, for one pod's cycle, the constrained placements of the
// learned workload with their share of the requests.
type admission struct {
	matchers []nodeaffinity.RequiredNodeAffinity
	shares   []float64
}

// admissionFor prepares the exclusion measure for the learner's
// placements; nil when none is constrained. A key the plugin does not
// remember (forgotten, or observed by an earlier process) counts as
// unconstrained.
func (p *placements) admissionFor(where []topology.Placement) *admission {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total float64
	for _, pl := range where {
		total += pl.Weight
	}
	a := &admission{}
	used := make(map[string]bool, len(where))
	for _, pl := range where {
		m, ok := p.byKey[pl.Key]
		if pl.Key == "" || !ok || total <= 0 {
			continue
		}
		used[pl.Key] = true
		a.matchers = append(a.matchers, m)
		a.shares = append(a.shares, pl.Weight/total)
	}
	if len(p.byKey) > rememberedPlacements {
		for key := range p.byKey {
			if !used[key] {
				delete(p.byKey, key)
			}
		}
	}
	if len(a.matchers) == 0 {
		return nil
	}
	return a
}

// excluded is the share of the learned requests whose pods may not run
// on node.
func (a *admission) excluded(node *v1.Node) float64 {
	if a == nil {
		return 0
	}
	var out float64
	for i := range a.matchers {
		// Match errors only on a selector the API server does not
		// admit; such pods run nowhere, so they are excluded here too.
		if ok, err := a.matchers[i].Match(node); !ok || err != nil {
			out += a.shares[i]
		}
	}
	return out
}
