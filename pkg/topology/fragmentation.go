package topology

import (
	"errors"
	"fmt"
)

// TaskClass is one kind of request in a workload: GPUs whole devices each
// asking for Share of a device (Share < 1 only with GPUs == 1), and the
// CPU and memory its pods typically ask for besides (0: not counted).
type TaskClass struct {
	GPUs      int     `json:"gpus"`
	Share     float64 `json:"share"`
	Weight    float64 `json:"weight"`
	CPUMilli  int64   `json:"cpuMilli,omitempty"`
	MemoryMiB int64   `json:"memoryMiB,omitempty"`
}

// Host is what a node has left besides its GPUs: the CPU and memory a
// class's pods need to use a free GPU there.
type Host struct {
	CPUMilli, MemoryMiB int64
}

// Workload is the expected mix of future requests; FGD ("fragmentation
// gradient descent", Weng et al., ATC'23) measures fragmentation against it.
type Workload []TaskClass

// DefaultWorkload summarizes the GPU pods of the openb production trace
// (traces/openb, default pod list, 7,064 GPU pods): shares rounded to
// quarters and whole-GPU counts, weighted by how often they occur, each
// with the median CPU and memory of its pods. 44% ask for a share of one
// GPU, 55% for one whole GPU, 1% for 2, 4 or 8; multi-GPU classes keep
// a weight of at least 2% so that free whole GPUs still count.
func DefaultWorkload() Workload {
	return Workload{
		{GPUs: 1, Share: 0.25, Weight: 0.099, CPUMilli: 4000, MemoryMiB: 22888},
		{GPUs: 1, Share: 0.5, Weight: 0.148, CPUMilli: 8000, MemoryMiB: 30517},
		{GPUs: 1, Share: 0.75, Weight: 0.188, CPUMilli: 3152, MemoryMiB: 5600},
		{GPUs: 1, Share: 1, Weight: 0.554, CPUMilli: 11400, MemoryMiB: 48128},
		{GPUs: 2, Share: 1, Weight: 0.02, CPUMilli: 16200, MemoryMiB: 66560},
		{GPUs: 4, Share: 1, Weight: 0.02, CPUMilli: 32200, MemoryMiB: 132096},
		{GPUs: 8, Share: 1, Weight: 0.02, CPUMilli: 88000, MemoryMiB: 327680},
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
		case c.CPUMilli < 0:
			return fmt.Errorf("workload[%d].cpuMilli: must not be negative, got %d", i, c.CPUMilli)
		case c.MemoryMiB < 0:
			return fmt.Errorf("workload[%d].memoryMiB: must not be negative, got %d", i, c.MemoryMiB)
		}
	}
	return nil
}

// HostPressure is how many of a node's free GPUs a pod's CPU and memory
// take the room of: the GPUs left free once the pod runs (freeAfter),
// times how much more of the node's free CPU or memory (free, before the
// pod; the larger share) the pod takes than of its free GPU capacity
// (freeBefore less freeAfter, over freeBefore). Fragmentation counts GPUs
// stranded once a node has too little CPU or memory for a class; this is
// the smooth part of the same loss: where CPU is nearly all asked for
// (81-91% on the openb traces at full GPU demand), a pod that takes a
// node's cores out of proportion to its GPUs brings the node closer to
// stranding the rest, while one in proportion, or one on a node whose
// GPUs are all in use, costs nothing. 0 when the node reports no free
// CPU or memory (nothing left to take).
func HostPressure(freeBefore, freeAfter float64, free, pod Host) float64 {
	share := 0.0
	if free.CPUMilli > 0 {
		share = float64(pod.CPUMilli) / float64(free.CPUMilli)
	}
	if free.MemoryMiB > 0 {
		share = max(share, float64(pod.MemoryMiB)/float64(free.MemoryMiB))
	}
	gpuShare := 0.0
	if freeBefore > 0 {
		gpuShare = (freeBefore - freeAfter) / freeBefore
	}
	return freeAfter * max(0, min(1, share)-gpuShare)
}

// Fragmentation returns the expected number of GPUs' worth of free capacity
// on one node that the next request cannot use, weighted by the workload.
// free holds the free share of each GPU of the node, in [0, 1]; host what
// the node has left of CPU and memory (nil: not counted); excluded the
// share of future requests that may not run on the node at all (their
// pods' node selector or affinity rules it out, as a GPU model
// constraint does), in [0, 1].
//
// A class of one shared GPU cannot use a GPU with less free than it asks; a
// class of whole GPUs cannot use partially free GPUs, and cannot use any GPU
// of a node with fewer fully free GPUs than it needs. No class can use any
// GPU of a node without the CPU or memory its pods need besides: those
// GPUs are stranded (FGD counts them the same way), which is why packing
// GPU pods onto a node until its CPU runs out is no better than spreading.
//
// Requests that may not run on the node cannot use any of its GPUs:
// taking them as independent of the classes (a request's size says
// nothing of where it may run), the result is the mix of the classes'
// fragmentation over the admitted share and everything free over the
// excluded one. This is what keeps unconstrained pods off the GPU models
// that constrained ones need: a node few requests can use gains more
// from being filled.
//
// To measure many nodes against one workload, Compile it once and take
// each host's NodeFragmentation: the same figure without a pass over the
// classes per measurement.
func Fragmentation(free []float64, host *Host, excluded float64, w Workload) float64 {
	return w.Compile().For(host).Of(free, excluded)
}
