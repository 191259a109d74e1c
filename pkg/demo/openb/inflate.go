package openb

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// DefaultInflation is the artifact's workload inflation: pods are sampled
// until they ask for 1.3x the cluster's GPUs, so that the curve passes
// arrived = 100% (the headline) well before the run ends.
const DefaultInflation = 1.3

// CapacityMilli is the cluster's GPU capacity in milli-GPU.
func CapacityMilli(nodes []Node) int64 {
	var c int64
	for _, n := range nodes {
		c += int64(n.GPUs) * 1000
	}
	return c
}

// RequestedMilli is the milli-GPU the pods ask for in total.
func RequestedMilli(pods []Pod) int64 {
	var r int64
	for _, p := range pods {
		r += p.GPUMilliRequest()
	}
	return r
}

// Inflate follows the artifact's methodology: sample pods with replacement
// until their total GPU request reaches factor x CapacityMilli(nodes), then
// shuffle. Both steps use one PCG stream seeded with seed, so a seed names
// one workload. CPU-only pods are sampled like any other, keeping the
// trace's mix. Every returned pod is a copy named original + "-" + its
// sampling sequence number, so names are unique even when a pod is drawn
// twice. It returns nil when no pod asks for a GPU (the target could never
// be reached) or the target is zero.
func Inflate(pods []Pod, nodes []Node, factor float64, seed uint64) []Pod {
	target := factor * float64(CapacityMilli(nodes))
	if target <= 0 || RequestedMilli(pods) == 0 {
		return nil
	}
	// The second PCG word is a fixed constant so that the seed alone
	// determines the stream.
	rng := rand.New(rand.NewPCG(seed, 0x6f70656e62))
	var out []Pod
	var total float64
	for seq := 0; total < target; seq++ {
		p := pods[rng.IntN(len(pods))]
		p.Name = fmt.Sprintf("%s-%d", p.Name, seq)
		// Copies must not share the spec slice: a caller editing one pod
		// would otherwise edit every pod sampled from the same original.
		p.GPUSpec = slices.Clone(p.GPUSpec)
		out = append(out, p)
		total += float64(p.GPUMilliRequest())
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// ArrivalsUntil is the shortest prefix of the arrivals whose GPU request
// reaches percent % of capacityMilli: the pods a run must submit to read
// the curve at that arrival (the artifact's headline is read at 100%).
// The pod that crosses the mark is included, so the curve has a point at
// or beyond it; all pods are returned when they never reach it.
func ArrivalsUntil(arrivals []Pod, capacityMilli int64, percent float64) []Pod {
	target := percent / 100 * float64(capacityMilli)
	var total float64
	for i, p := range arrivals {
		total += float64(p.GPUMilliRequest())
		if total >= target {
			return arrivals[:i+1]
		}
	}
	return arrivals
}

// SampleNodes picks n of the nodes evenly spread over the list (which the
// trace sorts by shape), so a smaller cluster keeps the mix of models and
// sizes; all nodes when n is 0 or at least their number. Smaller
// clusters make quicker looks; the published figures are for all nodes.
func SampleNodes(nodes []Node, n int) []Node {
	if n <= 0 || n >= len(nodes) {
		return nodes
	}
	out := make([]Node, n)
	for i := range out {
		out[i] = nodes[i*len(nodes)/n]
	}
	return out
}
