package allocator

import (
	"fmt"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Policy says how to choose among feasible allocations. Each part can be
// switched off for A/B comparison; with all parts off the engine returns
// upstream's first-fit choice.
type Policy struct {
	// Topology prefers device sets with the best worst-pair link class,
	// then the set that leaves the largest intact free NVLink groups.
	Topology PolicyPart
	// MIG prefers partitions that keep the most (and largest) other
	// partitions placeable on the GPU and across the node.
	MIG PolicyPart
	// Packing places shares of consumable-capacity devices where they
	// least grow expected fragmentation against Workload.
	Packing PolicyPart
	// Workload is the expected request mix that Packing measures against.
	Workload topology.Workload
	// HostPressure weighs, within Packing, the free GPUs whose room the
	// CPU and memory of a pod without devices or with a share of one GPU
	// take (topology.HostPressure) against the growth of fragmentation;
	// 0 leaves FGD's measure alone.
	HostPressure float64
	// LinkClassCost is, within Packing, what one step of link class below
	// the best a node offers a claim's GPUs costs, in GPUs of expected
	// fragmentation: the trade-off between link quality now and room
	// later, measured on the churn streams (docs/scheduler.md).
	LinkClassCost float64
	// SearchBudget bounds the extra search steps spent per node looking
	// for a better allocation than the first one found.
	SearchBudget int
}

// PolicyPart switches one criterion on or off and weighs it.
type PolicyPart struct {
	Enabled bool
	Weight  float64
}

// DefaultPolicy turns every criterion on with weight 1: the defaults of
// the GPUTopology plugin's arguments.
func DefaultPolicy() Policy {
	return Policy{
		Topology:      PolicyPart{Enabled: true, Weight: 1},
		MIG:           PolicyPart{Enabled: true, Weight: 1},
		Packing:       PolicyPart{Enabled: true, Weight: 1},
		Workload:      topology.DefaultWorkload(),
		HostPressure:  DefaultHostPressure,
		LinkClassCost: DefaultLinkClassCost,
		SearchBudget:  20000,
	}
}

// DefaultHostPressure is the HostPressure weight measured on the openb
// traces (docs/scheduler.md): 0.2 and 0.5 gave the same figures within
// the seeds' spread, both fewer GPUs unallocated than 0 on six traces
// and the same on gpuspec33.
const DefaultHostPressure = 0.2

// DefaultLinkClassCost is the LinkClassCost measured on the churn
// streams (docs/scheduler.md): on NVLink-pair servers it kept 99.3% of
// multi-GPU claims at their node's best link class and served at least
// as many jobs as first-fit before the first rejection on every seed;
// from 0.5 up all claims kept it and one seed fell short.
const DefaultLinkClassCost = 0.25

func (p Policy) anyEnabled() bool {
	return p.Topology.Enabled || p.MIG.Enabled || p.Packing.Enabled
}

// MaxPolicyValue bounds the policy's weights, HostPressure and
// LinkClassCost. The defaults are 1, 0.2 and 0.25; far larger values
// overflow the scores (a LinkClassCost near 2e15 turns a node's rating
// into the framework's sentinel for an unmeasured node, weights near
// 1e308 make every comparison NaN).
const MaxPolicyValue = 1e6

// InPolicyRange reports whether v is a valid weight, HostPressure or
// LinkClassCost: a number in [0, MaxPolicyValue].
func InPolicyRange(v float64) bool { return v >= 0 && v <= MaxPolicyValue }

// Validate reports the first invalid field.
func (p Policy) Validate() error {
	for _, part := range []struct {
		name string
		p    PolicyPart
	}{{"topology", p.Topology}, {"mig", p.MIG}, {"packing", p.Packing}} {
		if !InPolicyRange(part.p.Weight) {
			return fmt.Errorf("policy.%s.weight: must be a number in [0, %g], got %v", part.name, MaxPolicyValue, part.p.Weight)
		}
	}
	if !InPolicyRange(p.HostPressure) {
		return fmt.Errorf("policy.hostPressure: must be a number in [0, %g], got %v", MaxPolicyValue, p.HostPressure)
	}
	if !InPolicyRange(p.LinkClassCost) {
		return fmt.Errorf("policy.linkClassCost: must be a number in [0, %g], got %v", MaxPolicyValue, p.LinkClassCost)
	}
	if p.SearchBudget < 0 {
		return fmt.Errorf("policy.searchBudget: must not be negative, got %d", p.SearchBudget)
	}
	if p.Packing.Enabled {
		if err := p.Workload.Validate(); err != nil {
			return fmt.Errorf("policy.%w", err)
		}
	}
	return nil
}
