package sim

import (
	"container/heap"
	"fmt"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/topology"
)

// NodeRule chooses the node for a job of n whole GPUs from the free GPUs
// of each node: an index, or -1 when no node has n free.
type NodeRule func(free []int, n int) int

// FirstFit is the lowest-numbered node with room.
func FirstFit(free []int, n int) int {
	for i, f := range free {
		if f >= n {
			return i
		}
	}
	return -1
}

// BestFit is the node with room that has the fewest free GPUs.
func BestFit(free []int, n int) int {
	return pickMin(free, n, func(i int) float64 { return float64(free[i]) })
}

// WorstFit is the node with room that has the most free GPUs.
func WorstFit(free []int, n int) int {
	return pickMin(free, n, func(i int) float64 { return -float64(free[i]) })
}

// FragmentationRule is FGD's rule on whole GPUs: the node whose
// fragmentation against w (topology.Fragmentation) grows least, ties to
// the node with fewer free GPUs when bestFitTies, else to the
// lowest-numbered. The rule remembers each count's fragmentation, so one
// rule serves one goroutine.
func FragmentationRule(w topology.Workload, bestFitTies bool) NodeRule {
	nf := w.Compile().For(nil)
	frag := map[int]float64{} // by free GPUs: used ones strand nothing
	of := func(f int) float64 {
		v, ok := frag[f]
		if !ok {
			free := make([]float64, f)
			for g := range free {
				free[g] = 1
			}
			v = nf.Of(free, 0)
			frag[f] = v
		}
		return v
	}
	return func(free []int, n int) int {
		return pickMin(free, n, func(i int) float64 {
			cost := of(free[i]-n) - of(free[i])
			if bestFitTies {
				cost += 1e-6 * float64(free[i])
			}
			return cost
		})
	}
}

// pickMin is the node with room of least cost, the lowest-numbered of
// equals (1e-9), or -1.
func pickMin(free []int, n int, cost func(int) float64) int {
	best, bestCost := -1, 0.0
	for i, f := range free {
		if f < n {
			continue
		}
		if c := cost(i); best < 0 || c < bestCost-1e-9 {
			best, bestCost = i, c
		}
	}
	return best
}

// Workload is the stream's job mix as fragmentation's workload: each
// kind of whole GPUs a class, weighted as it arrives.
func (st Stream) Workload() (topology.Workload, error) {
	var w topology.Workload
	for _, k := range st.Kinds {
		if k.Template.Class != contract.ClassGPU || k.Template.Count < 1 {
			return nil, fmt.Errorf("stream %s: kind %s does not ask for whole GPUs", st.Name, k.Name)
		}
		w = append(w, topology.TaskClass{GPUs: int(k.Template.Count), Share: 1, Weight: k.Weight})
	}
	return w, nil
}

// Model is a counting model of a whole-GPU stream's fleet: a job takes
// as many GPUs of one node as it asks for, and nothing else (links, CPU,
// a learned mix) counts. Every node rule sees the same arrivals and
// departures, the jobs the stream's churn runs schedule, so the model
// tells how much placement alone can change the jobs served.
type Model struct {
	st    Stream
	w     topology.Workload
	nodes int
	gpus  int // per node
}

// Model builds the stream's counting model; its fleet must be one group
// of nodes and its kinds whole GPUs.
func (st Stream) Model() (*Model, error) {
	w, err := st.Workload()
	if err != nil {
		return nil, err
	}
	if len(st.Fleet) != 1 {
		return nil, fmt.Errorf("stream %s: the counting model takes one group of nodes, not %d", st.Name, len(st.Fleet))
	}
	m, err := mocknvml.New(st.Fleet[0].Shape)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", st.Name, err)
	}
	return &Model{st: st, w: w, nodes: st.Fleet[0].Count, gpus: len(m.Devices)}, nil
}

// ModelRun is what one seed of a counting model served.
type ModelRun struct {
	// Served counts the jobs served; BeforeRejection those served before
	// the first job that found no node with room.
	Served, BeforeRejection int
}

// Served replays the stream's arrivals for seed, placing each job by
// rule, and returns the jobs served.
func (m *Model) Served(seed uint64, rule NodeRule) ModelRun {
	free := make([]int, m.nodes)
	for i := range free {
		free[i] = m.gpus
	}
	var held departures[modelJob]
	var run ModelRun
	rejected := false
	for _, j := range m.st.jobs(seed, float64(m.nodes*m.gpus)) {
		for held.Len() > 0 && held[0].leave <= j.arrive {
			r := heap.Pop(&held).(modelJob)
			free[r.node] += r.gpus
		}
		n := m.w[j.kind].GPUs
		i := rule(free, n)
		if i < 0 {
			rejected = true
			continue
		}
		free[i] -= n
		run.Served++
		if !rejected {
			run.BeforeRejection++
		}
		heap.Push(&held, modelJob{job: j, node: i, gpus: n})
	}
	return run
}

// modelJob is a served job of the counting model until it leaves.
type modelJob struct {
	job
	node, gpus int
}
