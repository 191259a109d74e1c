package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// outcome classifies what an allocator said about a problem.
type outcome string

const (
	outcomeOK          outcome = "allocated"
	outcomeNone        outcome = "unsatisfiable"
	outcomeInvalidPool outcome = "invalid-pool"
	outcomeError       outcome = "error"
)

func upstreamAllocate(p *problem) ([]resourceapi.AllocationResult, outcome, error) {
	ctx := context.Background()
	a, err := structured.NewAllocator(ctx, p.features, *p.state, p.classes, p.slices,
		cel.NewCache(100, cel.Features{EnableConsumableCapacity: p.features.ConsumableCapacity}))
	if err != nil {
		return nil, outcomeError, err
	}
	res, err := a.Allocate(ctx, p.node, p.claims)
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, outcomeInvalidPool, err
	case err != nil:
		return nil, outcomeError, err
	case res == nil:
		return nil, outcomeNone, nil
	}
	return res, outcomeOK, nil
}

func ourAllocate(p *problem, pol Policy, host *HostUse) (*Result, outcome, error) {
	e, err := New(Options{Features: p.features, Policy: pol})
	if err != nil {
		return nil, outcomeError, err
	}
	s := e.NewSession(NewInventory(p.slices, p.features), p.classes, p.state, p.claims)
	res, err := s.Allocate(context.Background(), p.node, host)
	return res, outcomeOf(err), err
}

// outcomeOf classifies the engine's error.
func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, ErrInvalidPool):
		return outcomeInvalidPool
	case errors.Is(err, ErrUnsatisfiable):
		return outcomeNone
	}
	return outcomeError
}

// withoutShareIDs clears the random share IDs so results can be compared.
func withoutShareIDs(in []resourceapi.AllocationResult) []resourceapi.AllocationResult {
	out := make([]resourceapi.AllocationResult, len(in))
	for i := range in {
		out[i] = *in[i].DeepCopy()
		for j := range out[i].Devices.Results {
			out[i].Devices.Results[j].ShareID = nil
		}
	}
	return out
}

var quantityCmp = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// checkAgainstUpstream runs one generated problem through both allocators
// and reports every disagreement.
func checkAgainstUpstream(p *problem) error {
	up, upOut, upErr := upstreamAllocate(p)
	if upOut == outcomeOK {
		if err := validate(p, up); err != nil {
			return fmt.Errorf("validator rejects upstream's result (validator bug?): %w", err)
		}
	}
	for _, pol := range policies {
		ours, out, err := ourAllocate(p, pol.p, p.host)
		// On the stable path upstream's answer may vary by run.
		agrees := out == upOut || (isLegacy(p.features) && upstreamMaySay(p, out))
		if !agrees {
			return fmt.Errorf("policy %s: upstream says %s (%v), gputopo says %s (%v)", pol.name, upOut, upErr, out, err)
		}
		if out != outcomeOK {
			continue
		}
		if err := validate(p, ours.Allocations); err != nil {
			return fmt.Errorf("policy %s: invalid allocation: %w", pol.name, err)
		}
		if pol.name == "first-fit" && !isLegacy(p.features) {
			if diff := cmp.Diff(withoutShareIDs(up), withoutShareIDs(ours.Allocations), quantityCmp); diff != "" {
				return fmt.Errorf("first-fit differs from upstream (-upstream +gputopo):\n%s", diff)
			}
		}
	}
	return nil
}

// legacyReruns bounds how often upstreamMaySay asks upstream again.
const legacyReruns = 60

// upstreamMaySay reports whether upstream's allocator says want for p in
// one of a number of runs. Its stable allocator visits pools in Go map
// order, which changes from run to run: whether a selector error (or a
// node selector it cannot merge) is met before a solution then depends on
// the run. The engine visits pools in the order that map was filled, the
// order upstream uses most often (for up to 8 pools, a run starts the
// iteration at a random one of 8 slots, and every slot past the last pool
// starts at the first), so 60 runs all missing it is practically
// impossible; an outcome no run produces is a disagreement.
func upstreamMaySay(p *problem, want outcome) bool {
	for range legacyReruns {
		if _, o, _ := upstreamAllocate(p); o == want {
			orderDependent.Add(1)
			return true
		}
	}
	return false
}

// orderDependent counts the problems upstreamMaySay settled.
var orderDependent atomic.Int64

func TestDifferentialAgainstUpstream(t *testing.T) {
	cases := 10000
	if testing.Short() {
		cases = 1000
	}
	counts := map[outcome]int{}
	var kinds, kindFailures [numEdgeKinds]int
	var varied, variedFailures [numVariations]int
	failures := 0
	for seed := range uint64(cases) {
		p := newProblem(seed)
		_, out, _ := upstreamAllocate(p)
		counts[out]++
		kinds[p.kind]++
		for _, v := range p.variations {
			varied[v]++
		}
		if err := checkAgainstUpstream(p); err != nil {
			failures++
			kindFailures[p.kind]++
			for _, v := range p.variations {
				variedFailures[v]++
			}
			if failures <= 5 {
				t.Errorf("seed %d (%s, varied %v): %v", seed, p.kind, p.variations, err)
			}
		}
	}
	t.Logf("outcomes over %d problems: %v", cases, counts)
	t.Logf("%d checks where upstream's stable allocator changed its answer between runs", orderDependent.Load())
	for k := range numEdgeKinds {
		t.Logf("%-22s %5d problems, %d disagree", k, kinds[k], kindFailures[k])
	}
	for v := range numVariations {
		t.Logf("varied %-23s %5d problems, %d disagree", v, varied[v], variedFailures[v])
	}
	if failures > 0 {
		t.Fatalf("%d of %d problems disagree", failures, cases)
	}
	// The generator must exercise every outcome and every edge kind, or the
	// test proves little.
	for _, o := range []outcome{outcomeOK, outcomeNone, outcomeInvalidPool, outcomeError} {
		if counts[o] < cases/200 {
			t.Errorf("only %d problems with outcome %s: generator too narrow", counts[o], o)
		}
	}
	for k := edgeCompatibilityGroups; k < numEdgeKinds; k++ {
		if float64(kinds[k]) < 0.8*edgeShare*float64(cases) {
			t.Errorf("only %d problems of edge kind %s, want about %.0f", kinds[k], k, edgeShare*float64(cases))
		}
	}
	// A variation that applies rarely (a pool with one slice cannot move
	// half of itself) is still wanted in a third of its draws.
	for v := range numVariations {
		if float64(varied[v]) < 0.3*variationShare*float64(cases) {
			t.Errorf("only %d problems with variation %s, want about %.0f", varied[v], v, variationShare*float64(cases))
		}
	}
}

func FuzzDifferentialAgainstUpstream(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1234} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		if err := checkAgainstUpstream(newProblem(seed)); err != nil {
			t.Fatal(err)
		}
	})
}
