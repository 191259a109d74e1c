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
