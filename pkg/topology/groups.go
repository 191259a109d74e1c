package topology

import "strconv"

// Intactness scores the free whole GPUs of one node: the sum of squared free
// counts per NVLink domain, plus the same per PCIe root and per NUMA node at
// smaller weights, divided by the square of the node's GPU count so that it
// lies in [0, 1.35]. Higher means larger intact groups remain. Taking GPUs from
// already-broken groups (buddy-style best-fit, as HiveD does with cells)
// keeps it high; splitting a fresh group lowers it.
//
// total is the number of whole GPUs on the node, free or not.
func Intactness(free []GPU, total int) float64 {
	if total == 0 || len(free) == 0 {
		return 0
	}
	var nvlink, root, numa sumOfSquares
	for _, g := range free {
		nvlink.add(groupKey(g.NVLinkDomain, g.Physical))
		root.add(groupKey(g.PCIeRoot, g.Physical))
		numa.add(groupKey(numaKey(g.NUMA), g.Physical))
	}
	t := float64(total * total)
	return (nvlink.value() + 0.25*root.value() + 0.1*numa.value()) / t
}

// groupKey puts GPUs without a group into a group of their own.
func groupKey(group, self string) string {
	if group != "" {
		return "g:" + group
	}
	return "self:" + self
}

func numaKey(n int64) string {
	if n < 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

type sumOfSquares struct {
	keys   []string
	counts []int
}

func (s *sumOfSquares) add(key string) {
	for i, k := range s.keys {
		if k == key {
			s.counts[i]++
			return
		}
	}
	s.keys = append(s.keys, key)
	s.counts = append(s.counts, 1)
}

func (s *sumOfSquares) value() float64 {
	v := 0
	for _, c := range s.counts {
		v += c * c
	}
	return float64(v)
}

// Groups indexes the whole GPUs of one node by NVLink domain, PCIe root
// and NUMA node once, so that Intactness of many candidate layouts costs
// a few integer operations each and allocates nothing.
type Groups struct {
	ids    [3][]int32 // per level, per GPU: dense group id
	counts [3]int     // per level: number of groups
	total  int
}

var levelWeights = [3]float64{1, 0.25, 0.1}

// NewGroups indexes gpus; GPUs without a group form groups of their own.
func NewGroups(gpus []GPU) *Groups {
	g := &Groups{total: len(gpus)}
	keys := [3]map[string]int32{{}, {}, {}}
	for _, gpu := range gpus {
		for l, k := range [3]string{groupKey(gpu.NVLinkDomain, gpu.Physical), groupKey(gpu.PCIeRoot, gpu.Physical), groupKey(numaKey(gpu.NUMA), gpu.Physical)} {
			id, ok := keys[l][k]
			if !ok {
				id = int32(len(keys[l]))
				keys[l][k] = id
			}
			g.ids[l] = append(g.ids[l], id)
		}
	}
	for l := range keys {
		g.counts[l] = len(keys[l])
	}
	return g
}

// ScratchSize is the length of the scratch slice Intactness needs.
func (g *Groups) ScratchSize() int { return g.counts[0] + g.counts[1] + g.counts[2] }

// Intactness is the same measure as the function Intactness, for the GPUs
// of the index for which free(i) is true. scratch must have ScratchSize
// elements; it is overwritten.
func (g *Groups) Intactness(free func(i int) bool, scratch []int) float64 {
	if g.total == 0 {
		return 0
	}
	clear(scratch)
	for i := range g.total {
		if !free(i) {
			continue
		}
		off := 0
		for l := range 3 {
			scratch[off+int(g.ids[l][i])]++
			off += g.counts[l]
		}
	}
	sum, off := 0.0, 0
	for l := range 3 {
		v := 0
		for _, c := range scratch[off : off+g.counts[l]] {
			v += c * c
		}
		sum += levelWeights[l] * float64(v)
		off += g.counts[l]
	}
	return sum / float64(g.total*g.total)
}
