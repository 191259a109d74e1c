package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// The engine shares work between the nodes of one session (the solution
// memo, for nodes of one model in one state) and between sessions on one
// inventory (views kept across Refresh). TestDifferentialAgainstUpstream
// builds a fresh engine per problem, so these tests ask one engine about
// several nodes and several rounds of slice changes, each answer compared
// with upstream's on the same input.

// policies are the engine's two checks: first-fit must give upstream's
// very result, the default policy upstream's outcome with a valid result.
var policies = []struct {
	name string
	p    Policy
}{{"first-fit", firstFitPolicy()}, {"default", DefaultPolicy()}}

// checkSession asks the session for the node and compares with upstream.
func checkSession(s *Session, p *problem, node *v1.Node, policy string) error {
	q := *p
	q.node = node
	up, upOut, upErr := upstreamAllocate(&q)
	res, err := s.Allocate(context.Background(), node, p.host)
	out := outcomeOf(err)
	switch {
	case out != upOut:
		return fmt.Errorf("upstream says %s (%v), gputopo says %s (%v)", upOut, upErr, out, err)
	case out != outcomeOK:
		return nil
	}
	if err := validate(&q, res.Allocations); err != nil {
		return fmt.Errorf("invalid allocation: %w", err)
	}
	if policy == "first-fit" {
		if diff := cmp.Diff(withoutShareIDs(up), withoutShareIDs(res.Allocations), quantityCmp); diff != "" {
			return fmt.Errorf("first-fit differs from upstream (-upstream +gputopo):\n%s", diff)
		}
	}
	return nil
}

// twinOfNode0 adds node-2 with copies of node-0's own slices and ledger
// entries, changed in one way the memo must tell apart (or not at all,
// so that it answers from memory), and returns node-2 and the change.
func twinOfNode0(p *problem, r *rand.Rand) (*v1.Node, string) {
	rename := func(s string) string { return strings.ReplaceAll(s, "node-0", "node-2") }
	var twin []*resourceapi.ResourceSlice
	for _, s := range p.slices {
		if ptr.Deref(s.Spec.NodeName, "") == "node-0" {
			c := s.DeepCopy()
			c.Name, c.Spec.Pool.Name, c.Spec.NodeName = rename(c.Name), rename(c.Spec.Pool.Name), ptr.To("node-2")
			twin = append(twin, c)
		}
	}
	change := "identical"
	if len(twin) > 0 {
		twin, change = changeTwin(twin, r)
	}
	p.slices = append(p.slices, twin...)
	sameLedger := r.IntN(6) != 0
	if !sameLedger {
		change += ", ledger differs"
	}
	p.state = withTwinLedger(p.state, rename, sameLedger)
	node := p.node.DeepCopy()
	node.Name = "node-2"
	if r.IntN(3) == 0 {
		node.Labels = map[string]string{"zone": "c"}
		change += ", other zone"
	}
	return node, change
}

// changeTwin changes the twin's slices in one of the ways a node of the
// same model differs, or leaves them as they are.
func changeTwin(twin []*resourceapi.ResourceSlice, r *rand.Rand) ([]*resourceapi.ResourceSlice, string) {
	firstDevice := func(f func(d *resourceapi.Device)) {
		for _, s := range twin {
			if len(s.Spec.Devices) > 0 {
				f(&s.Spec.Devices[0])
			}
		}
	}
	switch r.IntN(8) {
	case 0:
		i := r.IntN(len(twin))
		return append(twin[:i], twin[i+1:]...), "a slice missing"
	case 1:
		for _, s := range twin {
			for i := range s.Spec.SharedCounters {
				for k := range s.Spec.SharedCounters[i].Counters {
					s.Spec.SharedCounters[i].Counters[k] = resourceapi.Counter{Value: resource.MustParse("1")}
				}
			}
		}
		return twin, "smaller counters"
	case 2:
		firstDevice(func(d *resourceapi.Device) {
			d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "broken", Value: "x", Effect: resourceapi.DeviceTaintEffectNoSchedule})
		})
		return twin, "a device tainted"
	case 3:
		firstDevice(func(d *resourceapi.Device) {
			d.BindingConditions, d.BindingFailureConditions, d.BindsToNode = []string{"attached"}, []string{"failed"}, ptr.To(true)
		})
		return twin, "binding conditions"
	case 4:
		c := twin[r.IntN(len(twin))].DeepCopy()
		c.Name += "-next"
		c.Spec.Pool.Generation += 5
		c.Spec.Pool.ResourceSliceCount = 2
		return append(twin, c), "a newer generation half published"
	}
	return twin, "identical"
}

// withTwinLedger copies the state, and node-0's entries as node-2's
// when same.
func withTwinLedger(st *AllocatedState, rename func(string) string, same bool) *AllocatedState {
	out := &AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	twinID := func(id structured.DeviceID) (structured.DeviceID, bool) {
		pool := id.Pool.String()
		return structured.MakeDeviceID(id.Driver.String(), rename(pool), id.Device.String()), same && strings.Contains(pool, "node-0")
	}
	for id := range st.AllocatedDevices {
		out.AllocatedDevices.Insert(id)
		if t, ok := twinID(id); ok {
			out.AllocatedDevices.Insert(t)
		}
	}
	for id, c := range st.AggregatedCapacity {
		out.AggregatedCapacity[id] = c
		if t, ok := twinID(id); ok {
			out.AggregatedCapacity[t] = c
		}
	}
	for id := range st.AllocatedSharedDeviceIDs {
		out.AllocatedSharedDeviceIDs.Insert(id)
		if t, ok := twinID(id.GetDeviceID()); ok {
			out.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(t, ptr.To(types.UID(id.ShareID.String()))))
		}
	}
	return out
}

// refreshedAlike is inv refreshed with the same slices in another order,
// one of them a copy (as the informer hands a republished slice over),
// so that the inventory is new and hands its unchanged views on.
func refreshedAlike(t *testing.T, inv *Inventory, published []*resourceapi.ResourceSlice, r *rand.Rand) *Inventory {
	t.Helper()
	shuffled := append([]*resourceapi.ResourceSlice(nil), published...)
	r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
	if len(shuffled) > 0 {
		shuffled[0] = shuffled[0].DeepCopy()
	}
	next := inv.Refresh(shuffled)
	if len(shuffled) > 0 && next == inv {
		t.Fatal("Refresh with a slice replaced kept the inventory")
	}
	return next
}

// otherNode is node-1, in a zone of its own.
func otherNode(zone string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": zone}}}
}

func differentialCases() int {
	if testing.Short() {
		return 200
	}
	return 1000
}

// TestDifferentialAcrossNodes asks one session about node-0, its twin
// and another node, then, on the inventory refreshed with the slices in
// another order, a new session about node-0 and the twin again.
func TestDifferentialAcrossNodes(t *testing.T) {
	answers := &tally{t: t}
	defer answers.report()
	for seed := range uint64(differentialCases()) {
		p := newProblem(seed)
		if isLegacy(p.features) {
			continue // upstream's answer may vary by run there
		}
		r := rand.New(rand.NewPCG(seed, 99))
		twin, change := twinOfNode0(p, r)
		nodes := []*v1.Node{p.node, twin, otherNode("b"), p.node, twin}
		for _, pol := range policies {
			e, err := New(Options{Features: p.features, Policy: pol.p})
			if err != nil {
				t.Fatal(err)
			}
			inv := NewInventory(p.slices, p.features)
			s := e.NewSession(inv, p.classes, p.state, p.claims)
			for i, node := range nodes {
				if i == 3 {
					inv = refreshedAlike(t, inv, p.slices, r)
					s = e.NewSession(inv, p.classes, p.state, p.claims)
				}
				answers.add(checkSession(s, p, node, pol.name), "seed %d (%s), policy %s, step %d on %s", seed, change, pol.name, i, node.Name)
			}
			answers.remembered += e.memoHits.Load()
		}
	}
}

// TestDifferentialAfterRefresh changes the slices between rounds (a
// slice removed, moved to another node, republished in a newer
// generation, tainted, its pool's slice count raised) and asks one
// engine, over an inventory refreshed each round, about three nodes.
func TestDifferentialAfterRefresh(t *testing.T) {
	answers := &tally{t: t}
	defer answers.report()
	for seed := range uint64(differentialCases()) {
		p := newProblem(seed)
		if isLegacy(p.features) {
			continue
		}
		r := rand.New(rand.NewPCG(seed, 7))
		twin, _ := twinOfNode0(p, r)
		nodes := []*v1.Node{p.node, otherNode("b"), twin}
		for _, pol := range policies {
			e, err := New(Options{Features: p.features, Policy: pol.p})
			if err != nil {
				t.Fatal(err)
			}
			q := *p
			inv := NewInventory(q.slices, q.features)
			change := "as generated"
			for round := range 4 {
				if round > 0 {
					change = changeSlices(&q, r)
					if r.IntN(4) == 0 {
						nodes[1] = otherNode("a")
						change += ", node-1 relabelled"
					}
					inv = inv.Refresh(q.slices)
				}
				s := e.NewSession(inv, q.classes, q.state, q.claims)
				for _, node := range nodes {
					answers.add(checkSession(s, &q, node, pol.name), "seed %d, policy %s, round %d (%s) on %s", seed, pol.name, round, change, node.Name)
				}
			}
			answers.remembered += e.memoHits.Load()
		}
	}
}

// tally counts a differential test's answers and reports the first few
// disagreements; a test whose answers came from the memo too seldom
// fails, as it no longer exercises what it is for.
type tally struct {
	t                *testing.T
	asked, disagreed int
	remembered       int64
}

func (c *tally) add(err error, where string, args ...any) {
	c.asked++
	if err == nil {
		return
	}
	c.disagreed++
	if c.disagreed <= 5 {
		c.t.Errorf("%s: %v", fmt.Sprintf(where, args...), err)
	}
}

func (c *tally) report() {
	c.t.Logf("%d answers, %d from the memo, %d disagree", c.asked, c.remembered, c.disagreed)
	if c.remembered < int64(c.asked)/10 {
		c.t.Errorf("only %d of %d answers came from the memo: the test no longer exercises it", c.remembered, c.asked)
	}
}

// changeSlices makes one to three changes to the problem's slices, each
// on a copy (the inventory keeps the old objects), and says which.
func changeSlices(p *problem, r *rand.Rand) string {
	var done []string
	for range 1 + r.IntN(3) {
		if len(p.slices) == 0 {
			break
		}
		i := r.IntN(len(p.slices))
		s := p.slices[i]
		c := s.DeepCopy()
		switch r.IntN(5) {
		case 0:
			p.slices = append(append([]*resourceapi.ResourceSlice(nil), p.slices[:i]...), p.slices[i+1:]...)
			done = append(done, "removed "+s.Name)
			continue
		case 1:
			c.Name += "-next"
			c.Spec.Pool.Generation++
			if node := r.IntN(3); node < 2 {
				c.Spec.NodeName = ptr.To(fmt.Sprintf("node-%d", node))
				c.Spec.AllNodes, c.Spec.NodeSelector, c.Spec.PerDeviceNodeSelection = nil, nil, nil
			}
			p.slices = append(append([]*resourceapi.ResourceSlice(nil), p.slices...), c)
			done = append(done, "newer generation of "+s.Name)
			continue
		case 2:
			if len(c.Spec.Devices) > 0 {
				d := &c.Spec.Devices[0]
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "broken", Value: "x", Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
			done = append(done, "tainted "+s.Name)
		case 3:
			if c.Spec.NodeName == nil {
				continue
			}
			c.Spec.NodeName = ptr.To(map[string]string{"node-0": "node-1"}[*c.Spec.NodeName])
			if *c.Spec.NodeName == "" {
				c.Spec.NodeName = ptr.To("node-0")
			}
			done = append(done, "moved "+s.Name)
		case 4:
			c.Spec.Pool.ResourceSliceCount++
			done = append(done, "slice count raised in "+s.Name)
		}
		p.slices = append([]*resourceapi.ResourceSlice(nil), p.slices...)
		p.slices[i] = c
	}
	return strings.Join(done, ", ")
}
