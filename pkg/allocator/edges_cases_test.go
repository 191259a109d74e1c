package allocator

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// The cases of TestEdgeParity, one function per group of kinds.

// Kind 1: with the gate off, upstream ignores slices with compatibility
// groups, which leaves their pool incomplete; with it on, New refuses.
func compatibilityCases() []edgeCase {
	slices := func() []*resourceapi.ResourceSlice {
		grouped := consumer("mig-1g", "mem", "10Gi")
		grouped.ConsumesCounters[0].CompatibilityGroups = []string{"a"}
		return []*resourceapi.ResourceSlice{
			edgeSlice("p-whole", "p", "node-0", 3, consumer("whole", "mem", "40Gi")),
			edgeSlice("p-mig", "p", "node-0", 3, grouped),
			edgeCounters("p-counters", "p", "node-0", 3, "mem", "40Gi"),
		}
	}
	gateOn := withFeatures(DefaultFeatures(), func(f *Features) { f.CompatibilityGroups = true })
	k := edgeCompatibilityGroups
	return []edgeCase{
		{name: "gate off: slice ignored, pool incomplete", kind: k, p: edgeProblem(DefaultFeatures(), slices(), exact("r", "any", 1)),
			upstream: outcomeNone, errHas: []string{"a resource pool of the node is being updated"}},
		{name: "gate off: All on the incomplete pool", kind: k, p: edgeProblem(DefaultFeatures(), slices(), allOf("r", "any")),
			upstream: outcomeError, errHas: []string{"resource pool gpu.example.com/p is currently being updated"}},
		{name: "gate off: stable path", kind: k, p: edgeProblem(stableFeatures, slices(), exact("r", "any", 1)),
			upstream: outcomeNone},
		// Refused, documented: upstream's experimental allocator serves
		// the gate; the engine does not implement it.
		{name: "gate on: refused", kind: k, p: edgeProblem(gateOn, slices(), exact("r", "any", 1)),
			upstream: outcomeOK, ours: outcomeError, errHas: []string{"DRADeviceCompatibilityGroups"}},
	}
}

// pairPool is a pool on node-0 with devices a and b consuming mem=aUse and
// mem=bUse of a counter with total mem=total.
func pairPool(total, aUse, bUse string) []*resourceapi.ResourceSlice {
	return []*resourceapi.ResourceSlice{
		edgeSlice("p-devices", "p", "node-0", 2, consumer("a", "mem", aUse), consumer("b", "mem", bUse)),
		edgeCounters("p-counters", "p", "node-0", 2, "mem", total),
	}
}

// pairCase asks for both devices of pairPool.
func pairCase(kind edgeKind, name, total, aUse, bUse string, fits bool) edgeCase {
	c := edgeCase{name: name, kind: kind, p: edgeProblem(DefaultFeatures(), pairPool(total, aUse, bUse), exact("r", "any", 2))}
	if fits {
		c.upstream, c.devices = outcomeOK, []string{"a", "b"}
	} else {
		// Each alone fits: the reason cannot name counters.
		c.upstream, c.errHas = outcomeNone, []string{"needs 2, 2 match"}
	}
	return c
}

// Kinds 2 to 4: counter amounts are compared exactly, negative ones too.
func counterCases() []edgeCase {
	negTotal := []*resourceapi.ResourceSlice{
		edgeSlice("p-devices", "p", "node-0", 2, consumer("part", "mem", "1"), resourceapi.Device{Name: "plain"}),
		edgeCounters("p-counters", "p", "node-0", 2, "mem", "-1"),
	}
	neg, huge, sub := edgeNegativeCounters, edgeHugeCounters, edgeSubMilliCounters
	return []edgeCase{
		{name: "negative total: pool valid, counter consumers blocked", kind: neg, p: edgeProblem(DefaultFeatures(), negTotal, exact("r", "any", 2)),
			upstream: outcomeNone, errHas: []string{"1 shared counters exhausted"}},
		{name: "negative total: other devices allocatable", kind: neg, p: edgeProblem(DefaultFeatures(), negTotal, exact("r", "any", 1)),
			upstream: outcomeOK, devices: []string{"plain"}},
		pairCase(neg, "negative consumption leaves more", "1", "-1", "2", true),
		pairCase(neg, "negative consumption, still too much", "1", "-1", "3", false),
		{name: "negative consumption makes up for a negative total", kind: neg,
			p: edgeProblem(DefaultFeatures(), pairPool("-1", "-2", "5"), exact("r", "any", 1)), upstream: outcomeOK, devices: []string{"a"}},
		pairCase(huge, "2P + 2P do not fit in 3P", "3P", "2P", "2P", false),
		pairCase(huge, "2P + 1P fit in 3P", "3P", "2P", "1P", true),
		pairCase(huge, "int64 limit: 2^62 + 2^62-1 fit in 2^63-1", "9223372036854775807", "4611686018427387904", "4611686018427387903", true),
		pairCase(huge, "int64 limit: 2^62 + 2^62 do not fit in 2^63-1", "9223372036854775807", "4611686018427387904", "4611686018427387904", false),
		pairCase(huge, "beyond int64: 5E + 5E fit in 10E", "10E", "5E", "5E", true),
		pairCase(huge, "beyond int64: 5E + 6E do not fit in 10E", "10E", "5E", "6E", false),
		pairCase(huge, "27 digits apart: 1E + (1E - 1n) fit in 2E", "2E", "1E", "999999999999999999999999999n", true),
		pairCase(huge, "27 digits apart: 1E + (1E + 1n) do not fit in 2E", "2E", "1E", "1000000000000000000000000001n", false),
		adminClaimsCase(2, true),
		adminClaimsCase(3, false),
		{name: "amounts too far apart: pool invalid, named", kind: huge,
			p:        edgeProblem(DefaultFeatures(), pairPool("1e100001", "1n", "1"), exact("r", "any", 1)),
			upstream: outcomeOK, ours: outcomeInvalidPool,
			errHas: []string{"ResourceSlice p-counters: sharedCounters gpu: counter mem (100e99999)", "ResourceSlice p-devices: device a: consumesCounters gpu: counter mem (1n)", "100010 powers of ten apart"}},
		pairCase(sub, "500u + 500u fit in 1m", "1m", "500u", "500u", true),
		pairCase(sub, "500u + 501u do not fit in 1m", "1m", "500u", "501u", false),
		pairCase(sub, "1n + 2n fit in 3n", "3n", "1n", "2n", true),
		pairCase(sub, "1500m + 500m fit in 2", "2", "1500m", "500m", true),
	}
}

// adminClaimsCase: claims with admin access may take a device again, and
// each take charges its counters (as upstream does): with enough claims
// the run's sums could pass int64, so the run counts exactly although
// the pool's amounts fit int64 (two devices of 2^58 each, 2^59 in all).
func adminClaimsCase(claims int, fits bool) edgeCase {
	p := edgeProblem(DefaultFeatures(), pairPool("576460752303423488", "288230376151711744", "288230376151711744"))
	p.claims = nil
	for i := range claims {
		r := exact("r", "any", 1)
		r.Exactly.AdminAccess = ptr.To(true)
		p.claims = append(p.claims, claimOf(string(rune('c'+i)), r))
	}
	c := edgeCase{name: "admin access claims x 2^58 of 2^59", kind: edgeHugeCounters, p: p}
	if fits {
		c.name, c.upstream = "2 "+c.name, outcomeOK
	} else {
		c.name, c.upstream = "3 "+c.name, outcomeNone
	}
	return c
}

// Kind 5: upstream's stable allocator takes counter slices of every node,
// keeps input order within a pool and never evaluates a counter slice's
// node selector. Each case comes with its contrast on the default path.
func stableCases() []edgeCase {
	incomplete := func() []*resourceapi.ResourceSlice {
		return []*resourceapi.ResourceSlice{
			edgeSlice("here", "here", "node-0", 1, resourceapi.Device{Name: "gpu-0"}),
			edgeSlice("there-devices", "there", "node-1", 3, consumer("mig", "mem", "1")),
			edgeCounters("there-counters", "there", "node-1", 3, "mem", "4"),
		}
	}
	invalid := func() []*resourceapi.ResourceSlice {
		bad := consumer("mig", "mem", "1")
		bad.ConsumesCounters[0].CounterSet = "missing"
		return []*resourceapi.ResourceSlice{
			edgeSlice("here", "here", "node-0", 1, resourceapi.Device{Name: "gpu-0"}),
			edgeSlice("there-devices", "there", "node-1", 2, bad),
			edgeCounters("there-counters", "there", "node-1", 2, "mem", "4"),
		}
	}
	inputOrder := func() []*resourceapi.ResourceSlice {
		// Input order b, a; by name a, b. gpu-a has no mem: "strict"
		// errors at run time on it.
		return []*resourceapi.ResourceSlice{
			edgeSlice("b", "p", "node-0", 2, withMem(resourceapi.Device{Name: "gpu-b"})),
			edgeSlice("a", "p", "node-0", 2, resourceapi.Device{Name: "gpu-a"}),
		}
	}
	badSelector := func() []*resourceapi.ResourceSlice {
		counters := edgeCounters("p-counters", "p", "", 2, "mem", "4")
		counters.Spec.NodeSelector = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpGt, Values: []string{"a"}}},
		}}}
		return []*resourceapi.ResourceSlice{edgeSlice("p-devices", "p", "node-0", 2, consumer("part", "mem", "1")), counters}
	}
	poolOrder := func() []*resourceapi.ResourceSlice {
		return []*resourceapi.ResourceSlice{
			edgeSlice("z", "z", "node-0", 1, withMem(resourceapi.Device{Name: "gpu-z"})),
			edgeSlice("a", "a", "node-0", 1, resourceapi.Device{Name: "gpu-a"}),
		}
	}
	k, st, def := edgeStablePath, stableFeatures, DefaultFeatures()
	return []edgeCase{
		{name: "another node's incomplete pool fails All", kind: k, p: edgeProblem(st, incomplete(), allOf("r", "any")),
			upstream: outcomeError, errHas: []string{"resource pool gpu.example.com/there is currently being updated"}},
		{name: "default path: only this node's pools", kind: k, p: edgeProblem(def, incomplete(), allOf("r", "any")),
			upstream: outcomeOK, devices: []string{"gpu-0"}},
		{name: "another node's invalid pool", kind: k, p: edgeProblem(st, invalid(), exact("r", "any", 2)),
			upstream: outcomeInvalidPool, errHas: []string{"counter set missing not found"}},
		{name: "default path: no invalid pool here", kind: k, p: edgeProblem(def, invalid(), exact("r", "any", 2)),
			upstream: outcomeNone},
		{name: "slices in input order", kind: k, p: edgeProblem(st, inputOrder(), exact("r", "strict", 1)),
			upstream: outcomeOK, devices: []string{"gpu-b"}},
		{name: "default path: slices by name", kind: k, p: edgeProblem(def, inputOrder(), exact("r", "strict", 1)),
			upstream: outcomeError, errHas: []string{"CEL runtime error", "gpu-a"}},
		{name: "counter slice's node selector not evaluated", kind: k, p: edgeProblem(st, badSelector(), exact("r", "any", 1)),
			upstream: outcomeOK, devices: []string{"part"}},
		{name: "default path: counter slice's node selector evaluated", kind: k, p: edgeProblem(def, badSelector(), exact("r", "any", 1)),
			upstream: outcomeError, errHas: []string{"ResourceSlice p-counters: spec.nodeSelector", "must be an integer"}},
		// Upstream visits pools in map order: it errors in some runs.
		// The engine takes the order of first sight, upstream's most
		// frequent one for up to 8 pools; with more, upstream's order
		// follows hash values and cannot be matched (docs/allocator.md).
		{name: "pools in order of first sight", kind: k, p: edgeProblem(st, poolOrder(), exact("r", "strict", 1)),
			upstream: outcomeOK, upstreamRandom: true, devices: []string{"gpu-z"}},
		{name: "default path: pools by name", kind: k, p: edgeProblem(def, poolOrder(), exact("r", "strict", 1)),
			upstream: outcomeError},
	}
}

func twoTermDevice(d resourceapi.Device) resourceapi.Device {
	d.NodeSelector = zoneSelector("x", "a")
	return d
}

func localDevice(d resourceapi.Device) resourceapi.Device {
	d.NodeName = ptr.To("node-0")
	return d
}

// perDevice is a per-device-selected pool "pd" with devices in order.
func perDevice(devices ...resourceapi.Device) []*resourceapi.ResourceSlice {
	s := edgeSlice("pd", "pd", "", 1, devices...)
	s.Spec.PerDeviceNodeSelection = ptr.To(true)
	return []*resourceapi.ResourceSlice{s}
}

// networkAndLocal is a network pool whose slice has a two-term selector
// and a node-local pool, each with one shareable device, the network one
// already shared (so packing prefers it); netFirst names the pools so
// that the network one sorts first.
func networkAndLocal(netFirst bool) *problem {
	netPool, localPool := "b-net", "a-local"
	if netFirst {
		netPool, localPool = "a-net", "b-local"
	}
	net := edgeSlice("net", netPool, "", 1, shareable(resourceapi.Device{Name: "nic"}))
	net.Spec.NodeSelector = zoneSelector("x", "a")
	local := edgeSlice("local", localPool, "node-0", 1, shareable(resourceapi.Device{Name: "gpu"}))
	return withShare(edgeProblem(DefaultFeatures(), []*resourceapi.ResourceSlice{net, local}, shareOf("r")), netPool, "nic")
}

// Kinds 6 and 7: upstream cannot merge a node selector of several terms
// into the allocation's and fails when its first solution has such a
// device before any node-local one. The engine's first solution is
// upstream's, so it fails exactly then; otherwise it returns only
// solutions that build, whichever devices the policy prefers.
func selectorCases() []edgeCase {
	two, local := twoTermDevice(resourceapi.Device{Name: "two"}), localDevice(resourceapi.Device{Name: "local"})
	sharedTwo, sharedLocal := shareable(two), shareable(local)
	k6, k7, def := edgeDeviceSelectorTerms, edgeSliceSelectorTerms, DefaultFeatures()
	return []edgeCase{
		{name: "two-term device first", kind: k6, p: edgeProblem(def, perDevice(two, local), exact("r", "any", 1)),
			upstream: outcomeError, errHas: []string{"ResourceSlice pd: device two: nodeSelector: unsupported node selector with 2 terms"}},
		{name: "local device first", kind: k6, p: edgeProblem(def, perDevice(local, two), exact("r", "any", 1)),
			upstream: outcomeOK, devices: []string{"local"}},
		{name: "both, local first", kind: k6, p: edgeProblem(def, perDevice(local, two), exact("r", "any", 2)),
			upstream: outcomeOK, devices: []string{"local", "two"}},
		{name: "both, two-term first", kind: k6, p: edgeProblem(def, perDevice(two, local), exact("r", "any", 2)),
			upstream: outcomeError},
		{name: "policy prefers the two-term device", kind: k6,
			p:        withShare(edgeProblem(def, perDevice(sharedLocal, sharedTwo), shareOf("r")), "pd", "two"),
			upstream: outcomeOK, devices: []string{"local"}},
		{name: "policy prefers the two-term device, which comes first", kind: k6,
			p:        withShare(edgeProblem(def, perDevice(sharedTwo, sharedLocal), shareOf("r")), "pd", "two"),
			upstream: outcomeError},
		{name: "local pool first, policy prefers the network device", kind: k7, p: networkAndLocal(false),
			upstream: outcomeOK, devices: []string{"gpu"}},
		{name: "network pool first", kind: k7, p: networkAndLocal(true),
			upstream: outcomeError, errHas: []string{"ResourceSlice net: spec.nodeSelector: unsupported node selector with 2 terms"}},
	}
}
