package topology

import (
	"slices"
	"sort"
)

// CompiledWorkload is a workload grouped for Fragmentation: its share
// classes by share asked, its whole-GPU classes by GPU count. The
// allocator measures fragmentation at every leaf of its search on every
// node; grouping the classes once per workload leaves a pass over the
// classes' CPU and memory per node (For) and a pass over the node's GPUs
// per measurement (Of), instead of a pass over every class (up to a
// learner's 96) and, for each share class, over the GPUs.
type CompiledWorkload struct {
	weights float64
	// Per class: what its pods need besides the GPU, its weight, and
	// its group: an index into shareAt for a share class, into gpusAt
	// (offset by len(shareAt)) for a whole-GPU class.
	cpuMilli, memoryMiB []int64
	weight              []float64
	group               []int
	// shareAt holds the distinct shares of the share classes and gpusAt
	// the distinct GPU counts of the whole-GPU classes, ascending.
	shareAt []float64
	gpusAt  []int
}

// Compile groups w for Fragmentation.
func (w Workload) Compile() *CompiledWorkload {
	cw := &CompiledWorkload{group: make([]int, len(w))}
	for _, c := range w {
		cw.weights += c.Weight
		cw.cpuMilli = append(cw.cpuMilli, c.CPUMilli)
		cw.memoryMiB = append(cw.memoryMiB, c.MemoryMiB)
		cw.weight = append(cw.weight, c.Weight)
		if c.Share < 1 {
			cw.shareAt = append(cw.shareAt, c.Share)
		} else {
			cw.gpusAt = append(cw.gpusAt, c.GPUs)
		}
	}
	slices.Sort(cw.shareAt)
	cw.shareAt = slices.Compact(cw.shareAt)
	slices.Sort(cw.gpusAt)
	cw.gpusAt = slices.Compact(cw.gpusAt)
	for i, c := range w {
		if c.Share < 1 {
			cw.group[i] = sort.SearchFloat64s(cw.shareAt, c.Share)
		} else {
			cw.group[i] = len(cw.shareAt) + sort.SearchInts(cw.gpusAt, c.GPUs)
		}
	}
	return cw
}

// NodeFragmentation is a compiled workload on one node's host: the
// weight of the classes whose pods no longer find their CPU or memory
// there, and of those that do, by share and by GPU count.
type NodeFragmentation struct {
	cw       *CompiledWorkload
	stranded float64
	// shareAbove[i] is the weight of the fitting share classes asking
	// cw.shareAt[i] or more; upTo[i] that of the fitting whole-GPU
	// classes asking cw.gpusAt[i] GPUs or fewer; whole that of all
	// fitting whole-GPU classes.
	shareAbove, upTo []float64
	whole            float64
}

// For is the workload on a node with host left of CPU and memory (nil:
// every class fits).
func (cw *CompiledWorkload) For(host *Host) *NodeFragmentation {
	nf := &NodeFragmentation{cw: cw}
	groups := make([]float64, len(cw.shareAt)+len(cw.gpusAt))
	for i, w := range cw.weight {
		if host != nil && (cw.cpuMilli[i] > host.CPUMilli || cw.memoryMiB[i] > host.MemoryMiB) {
			nf.stranded += w
			continue
		}
		groups[cw.group[i]] += w
	}
	nf.shareAbove, nf.upTo = groups[:len(cw.shareAt)], groups[len(cw.shareAt):]
	for i := len(nf.shareAbove) - 2; i >= 0; i-- {
		nf.shareAbove[i] += nf.shareAbove[i+1]
	}
	for i := range nf.upTo {
		nf.whole += nf.upTo[i]
		nf.upTo[i] = nf.whole
	}
	return nf
}

// Of is Fragmentation of a node with free GPU shares free (each in
// [0, 1]) and the share excluded of future requests that may not run
// there.
func (nf *NodeFragmentation) Of(free []float64, excluded float64) float64 {
	if nf.cw.weights == 0 {
		return 0
	}
	var total, partial, shares float64
	fullCount := 0
	for _, f := range free {
		total += f
		if f >= 1 {
			fullCount++
		} else {
			partial += f
		}
		// A share class strands a GPU with less free than it asks.
		if i := firstAbove(nf.cw.shareAt, f); i < len(nf.shareAbove) {
			shares += f * nf.shareAbove[i]
		}
	}
	// A whole-GPU class strands the partial GPUs of a node with as many
	// full ones as it needs, and every GPU of one with fewer.
	served := 0.0
	for i, g := range nf.cw.gpusAt {
		if g > fullCount {
			break
		}
		served = nf.upTo[i]
	}
	sum := nf.stranded*total + shares + served*partial + (nf.whole-served)*total
	excluded = min(1, max(0, excluded))
	return (1-excluded)*sum/nf.cw.weights + excluded*total
}

// firstAbove is the index of the first of the ascending values above f,
// len(values) if none is.
func firstAbove(values []float64, f float64) int {
	if len(values) == 0 || f >= values[len(values)-1] {
		return len(values) // no share class asks more than f: none strands it
	}
	for i, v := range values {
		if v > f {
			return i
		}
	}
	return len(values)
}
