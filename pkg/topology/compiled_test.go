package topology

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// fragmentationByClass is Fragmentation as its comment states it, one
// class at a time: the reference the compiled form must agree with.
func fragmentationByClass(free []float64, host *Host, excluded float64, w Workload) float64 {
	partials := slices.DeleteFunc(slices.Clone(free), func(f float64) bool { return f >= 1 })
	total, partial, fullCount := sum(free), sum(partials), len(free)-len(partials)
	var weighted, weights float64
	for _, c := range w {
		weights += c.Weight
		frag := total
		switch {
		case host != nil && (c.CPUMilli > host.CPUMilli || c.MemoryMiB > host.MemoryMiB):
		case c.Share < 1:
			frag = 0
			for _, f := range free {
				if f < c.Share {
					frag += f
				}
			}
		case fullCount >= c.GPUs:
			frag = partial
		}
		weighted += c.Weight * frag
	}
	if weights == 0 {
		return 0
	}
	excluded = min(1, max(0, excluded))
	return (1-excluded)*weighted/weights + excluded*total
}

func sum(values []float64) float64 {
	s := 0.0
	for _, v := range values {
		s += v
	}
	return s
}

func randomWorkload(rng *rand.Rand) Workload {
	shares := []float64{0.1, 0.25, 0.5, 0.5, 0.75, 0.99, 1}
	w := make(Workload, 1+rng.IntN(40))
	for i := range w {
		c := TaskClass{GPUs: 1, Share: shares[rng.IntN(len(shares))], Weight: float64(rng.IntN(5)),
			CPUMilli: int64(rng.IntN(4)) * 8000, MemoryMiB: int64(rng.IntN(4)) * 32768}
		if c.Share == 1 {
			c.GPUs = []int{1, 2, 2, 4, 8}[rng.IntN(5)]
		}
		w[i] = c
	}
	return w
}

func randomFree(rng *rand.Rand) []float64 {
	free := make([]float64, rng.IntN(10))
	for i := range free {
		switch rng.IntN(3) {
		case 0:
			free[i] = 1
		case 1:
			free[i] = 0
		default:
			free[i] = []float64{0.1, 0.25, 0.3, 0.5, 0.75, 0.99}[rng.IntN(6)]
		}
	}
	return free
}

func TestCompiledFragmentationAgreesWithEachClass(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 5000 {
		w := randomWorkload(rng)
		var host *Host
		if rng.IntN(4) > 0 {
			host = &Host{CPUMilli: int64(rng.IntN(5)) * 8000, MemoryMiB: int64(rng.IntN(5)) * 32768}
		}
		free := randomFree(rng)
		excluded := []float64{0, 0, 0.3, 1, -1, 2}[rng.IntN(6)]
		want := fragmentationByClass(free, host, excluded, w)
		got := w.Compile().For(host).Of(free, excluded)
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Fatalf("case %d: workload %+v, host %+v, free %v, excluded %v: compiled %v, by class %v", n, w, host, free, excluded, got, want)
		}
	}
}
