package sim

import "math"

// mean of xs, which must not be empty.
func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// sampleStd is the sample standard deviation of xs (dividing by n-1: the
// seeds are a sample of the ones that could have been run), 0 for fewer
// than two.
func sampleStd(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m, ss := mean(xs), 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}
