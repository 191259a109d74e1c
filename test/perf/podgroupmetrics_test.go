package perf

import (
	"math"
	"sort"

	"k8s.io/component-base/metrics/legacyregistry"
)

// kube-scheduler's scheduler_podgroup_scheduling_algorithm_duration_seconds
// is a plain histogram, which the harness cannot reset between
// workloads: a workload's share is the difference of its buckets between
// the workload's start and end.
const podGroupAlgorithmMetric = "scheduler_podgroup_scheduling_algorithm_duration_seconds"

// histogram is cumulative counts by upper bound (seconds).
type histogram map[float64]uint64

func gatherHistogram(name string) (histogram, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	h := histogram{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				h[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	return h, nil
}

// quantilesSince returns the p50 and p99 (ms) of the observations after
// before, interpolated within buckets as PromQL's histogram_quantile;
// ok is false without observations.
func quantilesSince(before, after histogram) (p50, p99 float64, ok bool) {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	counts := make([]float64, len(bounds))
	for i, b := range bounds {
		counts[i] = float64(after[b] - before[b])
	}
	if len(counts) == 0 || counts[len(counts)-1] == 0 {
		return 0, 0, false
	}
	q := func(phi float64) float64 {
		rank := phi * counts[len(counts)-1]
		for i, c := range counts {
			if c < rank {
				continue
			}
			lo, below := 0.0, 0.0
			if i > 0 {
				lo, below = bounds[i-1], counts[i-1]
			}
			hi := bounds[i]
			if math.IsInf(hi, 1) {
				return lo * 1000
			}
			if c == below {
				return hi * 1000
			}
			return (lo + (hi-lo)*(rank-below)/(c-below)) * 1000
		}
		return bounds[len(bounds)-1] * 1000
	}
	return q(0.5), q(0.99), true
}
