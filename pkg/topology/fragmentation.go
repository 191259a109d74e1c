package topology

import (
	"errors"
	"fmt"
)

// TaskClass is one kind of request in a workload: GPUs whole devices each
// asking for Share of a device (Share < 1 only with GPUs == 1).
type TaskClass struct {
	GPUs   int     `json:"gpus"`
	Share  float64 `json:"share"`
	Weight float64 `json:"weight"`
}

// Workload is the expected mix of future requests; FGD ("fragmentation
// gradient descent", Weng et al., ATC'23) measures fragmentation against it.
type Workload []TaskClass

// DefaultWorkload is a coarse summary of the openb production trace
// (traces/openb, default pod list): about 38% of GPU pods ask for a share
// of one GPU, 45% for one whole GPU, the rest for 2, 4 or 8.
func DefaultWorkload() Workload {
	return Workload{
		{GPUs: 1, Share: 0.25, Weight: 0.12},
		{GPUs: 1, Share: 0.5, Weight: 0.18},
		{GPUs: 1, Share: 0.75, Weight: 0.08},
		{GPUs: 1, Share: 1, Weight: 0.45},
		{GPUs: 2, Share: 1, Weight: 0.07},
		{GPUs: 4, Share: 1, Weight: 0.04},
		{GPUs: 8, Share: 1, Weight: 0.06},
	}
}

// Validate checks that the workload is usable.
func (w Workload) Validate() error {
	if len(w) == 0 {
		return errors.New("workload: must have at least one task class")
	}
	for i, c := range w {
		switch {
		case c.GPUs < 1:
			return fmt.Errorf("workload[%d].gpus: must be at least 1, got %d", i, c.GPUs)
		case c.Share <= 0 || c.Share > 1:
			return fmt.Errorf("workload[%d].share: must be in (0, 1], got %v", i, c.Share)
		case c.GPUs > 1 && c.Share != 1:
			return fmt.Errorf("workload[%d].share: multi-GPU classes take whole GPUs, got %v", i, c.Share)
		case c.Weight < 0:
			return fmt.Errorf("workload[%d].weight: must not be negative, got %v", i, c.Weight)
		}
	}
	return nil
}

// Fragmentation returns the expected number of GPUs' worth of free capacity
// on one node that the next request cannot use, weighted by the workload.
// free holds the free share of each GPU of the node, in [0, 1].
//
// A class of one shared GPU cannot use a GPU with less free than it asks; a
// class of whole GPUs cannot use partially free GPUs, and cannot use any GPU
// of a node with fewer fully free GPUs than it needs.
func Fragmentation(free []float64, w Workload) float64 {
	var total, full, partial float64
	fullCount := 0
	for _, f := range free {
		total += f
		if f >= 1 {
			full += f
			fullCount++
		} else {
			partial += f
		}
	}
	var sum, weights float64
	for _, c := range w {
		weights += c.Weight
		var frag float64
		switch {
		case c.Share < 1:
			for _, f := range free {
				if f < c.Share {
					frag += f
				}
			}
		case fullCount >= c.GPUs:
			frag = partial
		default:
			frag = total
		}
		sum += c.Weight * frag
	}
	if weights == 0 {
		return 0
	}
	return sum / weights
}
