package sim

import (
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// The 1/2/4/8-GPU mix at 4:3:2:1: fragmentation of f free GPUs of an
// 8-GPU node is f times the weight of the classes asking for more than
// f (0.6 for 1 or 2 free, 0.9 for 3, 0.1 f for 4-7, 0 for 8).
func TestNodeRules(t *testing.T) {
	w, err := Stream{Name: "mix", Kinds: wholeGPUs(1, 2, 4, 8)}.Workload()
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]NodeRule{
		"first fit": FirstFit, "best fit": BestFit, "worst fit": WorstFit,
		"fragmentation": FragmentationRule(w, false), "fragmentation, best-fit ties": FragmentationRule(w, true),
	}
	for _, tc := range []struct {
		name string
		free []int
		n    int
		want map[string]int
	}{
		{"a 2-GPU job keeps a 4-GPU hole rather than the fullest node (4->2: +0.2, 6->4: -0.2)", []int{4, 6}, 2,
			map[string]int{"first fit": 0, "best fit": 0, "worst fit": 1, "fragmentation": 1, "fragmentation, best-fit ties": 1}},
		{"the node that empties wins (2->0: -0.6, 3->1: -0.3)", []int{8, 3, 5, 2}, 2,
			map[string]int{"first fit": 0, "best fit": 3, "worst fit": 0, "fragmentation": 3, "fragmentation, best-fit ties": 3}},
		{"equal growth (6->5 and 5->4: -0.1): the lower number, or the fuller node", []int{6, 5}, 1,
			map[string]int{"first fit": 0, "best fit": 1, "worst fit": 0, "fragmentation": 0, "fragmentation, best-fit ties": 1}},
		{"no room", []int{1, 1}, 2,
			map[string]int{"first fit": -1, "best fit": -1, "worst fit": -1, "fragmentation": -1, "fragmentation, best-fit ties": -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, rule := range rules {
				if got := rule(tc.free, tc.n); got != tc.want[name] {
					t.Errorf("%s: node %d, want %d", name, got, tc.want[name])
				}
			}
		})
	}
}

func TestModel(t *testing.T) {
	dgx := func(count int) []fleet.NodeGroup {
		return []fleet.NodeGroup{{Name: "dgx", Count: count, Shape: mocknvml.DGXH100, Mode: config.Whole}}
	}
	run := func(t *testing.T, st Stream, seed uint64, rule NodeRule) ModelRun {
		t.Helper()
		m, err := st.Model()
		if err != nil {
			t.Fatal(err)
		}
		return m.Served(seed, rule)
	}
	served := func(t *testing.T, st Stream, seed uint64, rule NodeRule) int {
		t.Helper()
		return run(t, st, seed, rule).Served
	}
	t.Run("light load serves every job", func(t *testing.T) {
		st := Stream{Name: "light", Jobs: 50, Load: 0.01, Kinds: wholeGPUs(1, 2, 4, 8), Fleet: dgx(2)}
		if got := run(t, st, 1, WorstFit); got != (ModelRun{Served: 50, BeforeRejection: 50}) {
			t.Errorf("served %+v, want all 50 before any rejection", got)
		}
	})
	t.Run("whole nodes at full load: departures free them, not every job fits", func(t *testing.T) {
		st := Stream{Name: "full", Jobs: 200, Load: 1, Kinds: wholeGPUs(8), Fleet: dgx(1)}
		got := run(t, st, 1, FirstFit)
		if got.Served == 0 || got.Served >= 200 {
			t.Errorf("served %d of 200, want some but not all", got.Served)
		}
		// The first job finds the node empty; some job after it finds it
		// taken, and some after that find it free again.
		if got.BeforeRejection < 1 || got.BeforeRejection >= got.Served {
			t.Errorf("served %d before the first rejection, %d in all: want at least the first, and fewer than all", got.BeforeRejection, got.Served)
		}
		if again := run(t, st, 1, BestFit); again != got {
			t.Errorf("one node: best fit served %+v, first fit %+v", again, got)
		}
	})
	t.Run("spreading serves fewer than packing on the same jobs", func(t *testing.T) {
		st := Stream{Name: "nvswitch", Jobs: 400, Load: 0.9, Kinds: wholeGPUs(1, 2, 4, 8), Fleet: dgx(8)}
		var first, worst int
		for seed := uint64(1); seed <= 5; seed++ {
			first += served(t, st, seed, FirstFit)
			worst += served(t, st, seed, WorstFit)
		}
		if worst >= first {
			t.Errorf("worst fit served %d, first fit %d over 5 seeds", worst, first)
		}
	})
	t.Run("MIG streams are not whole GPUs", func(t *testing.T) {
		st := Stream{Name: "mig", Jobs: 1, Load: 1, Kinds: migKinds("1g.10gb"), Fleet: dgx(1)}
		if _, err := st.Model(); err == nil || !strings.Contains(err.Error(), "kind 1g.10gb") {
			t.Errorf("got %v, want an error naming the kind", err)
		}
	})
}
