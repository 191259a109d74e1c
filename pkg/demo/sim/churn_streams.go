package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/replay"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// JobKind is one kind of job of a churn stream: one claim.
type JobKind struct {
	Name string
	// Template is the claim; its GPUs is what the job holds in GPUs.
	Template replay.ClaimTemplate
	// Weight is how often the kind arrives, relative to the others.
	Weight float64
}

// Stream is a churn workload: jobs of its kinds arrive on its fleet at
// random (a Poisson process), each holds its devices for a random
// (exponential) time and leaves.
type Stream struct {
	Name  string
	Fleet []fleet.NodeGroup
	Kinds []JobKind
	// Jobs is how many arrive.
	Jobs int
	// Load is the offered load: the GPUs the arriving jobs would hold
	// on average, over the fleet's GPUs.
	Load float64
}

// job is one arrival of a stream; times in mean job durations.
type job struct {
	seq, kind     int
	arrive, leave float64
}

// jobs draws the stream's arrivals for seed on a fleet of capacity GPUs.
// The draw depends on the stream's name and seed only, so every target
// gets the same jobs.
func (st Stream) jobs(seed uint64, capacity float64) []job {
	h := fnv.New64a()
	_, _ = h.Write([]byte(st.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	var total, meanGPUs float64
	for _, k := range st.Kinds {
		total += k.Weight
	}
	for _, k := range st.Kinds {
		meanGPUs += k.Weight / total * k.Template.GPUs
	}
	rate := st.Load * capacity / meanGPUs // arrivals per mean duration
	out := make([]job, st.Jobs)
	t := 0.0
	for i := range out {
		t += rng.ExpFloat64() / rate
		out[i] = job{seq: i, kind: pick(rng, st.Kinds, total), arrive: t, leave: t + rng.ExpFloat64()}
	}
	return out
}

func pick(rng *rand.Rand, kinds []JobKind, total float64) int {
	x := rng.Float64() * total
	for i, k := range kinds {
		if x < k.Weight {
			return i
		}
		x -= k.Weight
	}
	return len(kinds) - 1
}

// The streams' job mixes.
func wholeGPUs(counts ...int64) []JobKind {
	weights := map[int64]float64{1: 4, 2: 3, 4: 2, 8: 1}
	var out []JobKind
	for _, n := range counts {
		out = append(out, JobKind{Name: gpuKindName(n), Weight: weights[n],
			Template: replay.ClaimTemplate{Class: contract.ClassGPU, Count: n, GPUs: float64(n), Kind: gpuKindName(n)}})
	}
	return out
}

func gpuKindName(n int64) string {
	return map[int64]string{1: "1-gpu", 2: "2-gpu", 4: "4-gpu", 8: "8-gpu"}[n]
}

// migKinds: profiles of a 7-slice GPU, smaller ones more often.
func migKinds(profiles ...string) []JobKind {
	slices := []float64{1, 2, 3, 4, 7}
	weights := []float64{4, 2, 2, 1, 1}
	var out []JobKind
	for i, p := range profiles {
		out = append(out, JobKind{Name: p, Weight: weights[i], Template: replay.ClaimTemplate{
			Class: contract.ClassMIG, Count: 1, GPUs: slices[i] / 7, Kind: "MIG " + p,
			Selector: "device.attributes['" + contract.DefaultDriver + "']." + contract.AttrProfile + " == '" + p + "'"}})
	}
	return out
}

// shareKinds: memory shares of a GPU with memGiB GiB.
func shareKinds(memGiB float64, sizes ...int64) []JobKind {
	weights := []float64{4, 3, 2, 1}
	var out []JobKind
	for i, gi := range sizes {
		q := *resource.NewQuantity(gi<<30, resource.BinarySI)
		out = append(out, JobKind{Name: q.String() + "-share", Weight: weights[i], Template: replay.ClaimTemplate{
			Class: contract.ClassSharedGPU, Count: 1, Memory: &q, GPUs: float64(gi) / memGiB, Kind: "shared"}})
	}
	return out
}

// ChurnStreams are the churn benchmark's streams: NVLink-pair, NVSwitch
// and GB200 tray fleets with 1/2/4/8-GPU jobs (4 at most on a tray),
// A100 and H100 MIG fleets with mixed profiles, and shared H200s.
var ChurnStreams = []Stream{
	{Name: "nvlink-pairs", Jobs: 400, Load: 0.9, Kinds: wholeGPUs(1, 2, 4, 8),
		Fleet: []fleet.NodeGroup{{Name: "pcie", Count: 8, Shape: mocknvml.PCIePairs, Mode: config.Whole}}},
	{Name: "nvswitch", Jobs: 400, Load: 0.9, Kinds: wholeGPUs(1, 2, 4, 8),
		Fleet: []fleet.NodeGroup{{Name: "dgx", Count: 8, Shape: mocknvml.DGXH100, Mode: config.Whole}}},
	{Name: "gb200", Jobs: 400, Load: 0.9, Kinds: wholeGPUs(1, 2, 4),
		Fleet: []fleet.NodeGroup{{Name: "tray", Count: 16, Shape: mocknvml.GB200Tray, Mode: config.Whole, Rack: "nvl72-a"}}},
	{Name: "mig-a100", Jobs: 400, Load: 0.9, Kinds: migKinds("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
		Fleet: []fleet.NodeGroup{{Name: "a100", Count: 2, Shape: mocknvml.DGXA100, Mode: config.MIG}}},
	{Name: "mig-h100", Jobs: 400, Load: 0.9, Kinds: migKinds("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
		Fleet: []fleet.NodeGroup{{Name: "h100", Count: 2, Shape: mocknvml.DGXH100, Mode: config.MIG}}},
	{Name: "shared", Jobs: 400, Load: 0.9, Kinds: shareKinds(141, 8, 16, 40, 70),
		Fleet: []fleet.NodeGroup{{Name: "h200", Count: 2, Shape: mocknvml.DGXH200, Mode: config.Shared}}},
}

// ChurnStreamNames lists the streams' names.
func ChurnStreamNames() []string {
	var out []string
	for _, st := range ChurnStreams {
		out = append(out, st.Name)
	}
	return out
}

// ChurnStreamsNamed returns the named streams, each once, in the order
// given.
func ChurnStreamsNamed(names []string) ([]Stream, error) {
	var out []Stream
	seen := map[string]bool{}
	for _, n := range names {
		i := slices.IndexFunc(ChurnStreams, func(st Stream) bool { return st.Name == n })
		switch {
		case i < 0:
			return nil, fmt.Errorf("no churn stream %q (want one of %s)", n, strings.Join(ChurnStreamNames(), ", "))
		case seen[n]:
			return nil, fmt.Errorf("churn stream %q named twice", n)
		}
		seen[n] = true
		out = append(out, ChurnStreams[i])
	}
	return out, nil
}
