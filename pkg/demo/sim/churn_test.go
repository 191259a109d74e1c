package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/replay"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// Every kind of every churn stream fits its empty fleet: at a load so low
// that jobs hardly overlap, both targets serve every job. A kind whose
// selector matches nothing (a MIG profile the GPU lacks) fails here.
func TestChurnStreamsFitTheirFleets(t *testing.T) {
	ctx, cfg := shippedConfig(t)
	for _, st := range ChurnStreams {
		st.Jobs, st.Load = 3*len(st.Kinds), 0.001
		for _, target := range targets {
			run, err := RunChurn(ctx, cfg, st, 1, target)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range run.Kinds {
				if k.Served != k.Arrived {
					t.Errorf("%s, %s: %d of %d %s jobs served on an idle fleet", st.Name, target.Name, k.Served, k.Arrived, k.Kind)
				}
			}
		}
	}
}

// A job leaving frees its devices before the next arrives, and not
// earlier: 8-GPU jobs on one 8-GPU node are served exactly when the last
// served one has left, which the stream's own draw says independently.
func TestChurnDeparturesFreeDevices(t *testing.T) {
	ctx, cfg := shippedConfig(t)
	st := Stream{Name: "one-node", Jobs: 60, Load: 2, Kinds: wholeGPUs(8),
		Fleet: []fleet.NodeGroup{{Name: "dgx", Count: 1, Shape: mocknvml.DGXH100, Mode: config.Whole}}}
	want, busyUntil := 0, -1.0
	for _, j := range st.jobs(7, 8) {
		if j.arrive >= busyUntil {
			want++
			busyUntil = j.leave
		}
	}
	if want == st.Jobs || want < 5 {
		t.Fatalf("the draw serves %d of %d jobs; pick a seed that tests departures", want, st.Jobs)
	}
	for _, target := range targets {
		run, err := RunChurn(ctx, cfg, st, 7, target)
		if err != nil {
			t.Fatal(err)
		}
		if run.Served != want {
			t.Errorf("%s: served %d jobs, want %d", target.Name, run.Served, want)
		}
		if run.MultiGPU != run.Served || run.AtBestLink != run.Served {
			t.Errorf("%s: %d of %d multi-GPU claims judged, %d at best link; want every served one at best", target.Name, run.MultiGPU, run.Served, run.AtBestLink)
		}
		if run.AllocatedPercent <= 0 || run.AllocatedPercent > 100 {
			t.Errorf("%s: time-averaged allocation %.1f%%", target.Name, run.AllocatedPercent)
		}
		if run.RejectedWithRoom != 0 {
			t.Errorf("%s: %d rejections counted with room in the fleet; every one found the only node full", target.Name, run.RejectedWithRoom)
		}
	}
}

// A rejection counts as one with room when the fleet had as many GPUs
// free as the job asked for, equal included: 6-GPU jobs on three 8-GPU
// nodes are turned away only while every node holds one (6 GPUs free,
// 2 per node), so every rejection has room, and the jobs served are
// those of a three-server loss system.
func TestChurnCountsRejectionsWithRoom(t *testing.T) {
	ctx, cfg := shippedConfig(t)
	six := JobKind{Name: "6-gpu", Weight: 1, Template: replay.ClaimTemplate{Class: contract.ClassGPU, Count: 6, GPUs: 6, Kind: "6-gpu"}}
	st := Stream{Name: "three-nodes", Jobs: 60, Load: 2, Kinds: []JobKind{six},
		Fleet: []fleet.NodeGroup{{Name: "dgx", Count: 3, Shape: mocknvml.DGXH100, Mode: config.Whole}}}
	want, busy := 0, []float64{-1, -1, -1}
	for _, j := range st.jobs(3, 24) {
		if i := slices.IndexFunc(busy, func(until float64) bool { return until <= j.arrive }); i >= 0 {
			want++
			busy[i] = j.leave
		}
	}
	if want == st.Jobs || want < 5 {
		t.Fatalf("the draw serves %d of %d jobs; pick a seed that rejects some", want, st.Jobs)
	}
	for _, target := range targets {
		run, err := RunChurn(ctx, cfg, st, 3, target)
		if err != nil {
			t.Fatal(err)
		}
		if run.Served != want || run.RejectedWithRoom != st.Jobs-want {
			t.Errorf("%s: served %d, %d rejected with room; want %d served and the other %d rejected with room",
				target.Name, run.Served, run.RejectedWithRoom, want, st.Jobs-want)
		}
	}
}

func TestServedDifferencePairsSeeds(t *testing.T) {
	g, i := targets[0], targets[1]
	served := [][2]int{{10, 8}, {7, 8}, {9, 9}, {13, 8}} // seeds 1-4
	var runs []ChurnRun
	for k, n := range served {
		runs = append(runs, ChurnRun{Stream: "s", Seed: uint64(k + 1), Target: g, Served: n[0]})
	}
	for k := len(served) - 1; k >= 0; k-- { // the other target in the opposite order
		runs = append(runs, ChurnRun{Stream: "s", Seed: uint64(k + 1), Target: i, Served: served[k][1]})
	}
	_, cells := churnCells(runs)
	// Differences 2, -1, 0, 5: mean 1.5, sd √7, standard error 1.32.
	want := []string{"s", "more jobs served, per seed (mean ± standard error)", "+1.5 ± 1.3 against in-tree (first-fit)", ""}
	if got := servedDifference("s", cells, []string{g.Copy, i.Copy}, []string{g.Name, i.Name}); !slices.Equal(got, want) {
		t.Errorf("servedDifference = %q, want %q", got, want)
	}
	onlyOne := slices.DeleteFunc(slices.Clone(runs), func(r ChurnRun) bool { return r.Target.Copy != g.Copy })
	_, cells = churnCells(onlyOne)
	if got := servedDifference("s", cells, []string{g.Copy, i.Copy}, []string{g.Name, i.Name})[2]; got != "" {
		t.Errorf("without the other target's runs: %q, want empty", got)
	}
}

func TestChurnQualityAndTables(t *testing.T) {
	g, i := targets[0], targets[1]
	runs := []ChurnRun{
		{Stream: "pairs", Seed: 1, Target: g, Jobs: 10, Served: 9, ServedBeforeRejection: 7, RejectedWithRoom: 1, MultiGPU: 4, AtBestLink: 4, AllocatedPercent: 50,
			Kinds: []KindCount{{Kind: "2-gpu", Arrived: 10, Served: 9}}},
		{Stream: "pairs", Seed: 1, Target: i, Jobs: 10, Served: 8, ServedBeforeRejection: 8, MultiGPU: 4, AtBestLink: 1, AllocatedPercent: 40,
			Kinds: []KindCount{{Kind: "2-gpu", Arrived: 10, Served: 8}}},
		{Stream: "mig", Seed: 1, Target: g, Jobs: 5, Served: 5, ServedBeforeRejection: 5, Kinds: []KindCount{{Kind: "1g", Arrived: 5, Served: 5}}},
		{Stream: "mig", Seed: 1, Target: i, Jobs: 5, Served: 5, ServedBeforeRejection: 5, Kinds: []KindCount{{Kind: "1g", Arrived: 5, Served: 5}}},
	}
	var b strings.Builder
	if err := WriteChurnQuality(&b, runs); err != nil {
		t.Fatal(err)
	}
	want := `QUALITY churn/pairs/seed1 served gputopo=9 intree=8
QUALITY churn/pairs/seed1 served-before-first-rejection gputopo=7 intree=8
QUALITY churn/pairs/seed1 best-link-class-percent gputopo=100.0 intree=25.0
QUALITY churn/pairs/seed1 rejected-with-room gputopo=1 intree=0
QUALITY churn/pairs/seed1 gpus-held-percent gputopo=50.0 intree=40.0
QUALITY churn/mig/seed1 served gputopo=5 intree=5
QUALITY churn/mig/seed1 served-before-first-rejection gputopo=5 intree=5
QUALITY churn/mig/seed1 rejected-with-room gputopo=0 intree=0
QUALITY churn/mig/seed1 gpus-held-percent gputopo=0.0 intree=0.0
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("QUALITY lines (-want +got):\n%s", diff)
	}
	tables := ChurnTables(runs, []string{g.Name, i.Name}, []string{g.Copy, i.Copy})
	var md strings.Builder
	if err := WriteTablesMarkdown(&md, tables); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| pairs | jobs served | 9.0 (9–9) | 8.0 (8–8) |",
		"| pairs | of them with as many GPUs free in the fleet as asked for | 1.0 (1–1) | 0.0 (0–0) |",
		"| pairs | multi-GPU claims at their node's best link class, % | 100.0 (4 claims) | 25.0 (4 claims) |",
		"| pairs | at least as many served (in total / before the first rejection) | 1 / 0 of 1 seeds against in-tree (first-fit) |  |",
		"| pairs | more jobs served, per seed (mean ± standard error) | +1.0 (1 seed) against in-tree (first-fit) |  |",
		"| mig | more jobs served, per seed (mean ± standard error) | +0.0 (1 seed) against in-tree (first-fit) |  |",
		"| mig | multi-GPU claims at their node's best link class, % | – | – |",
		"| pairs | 2-gpu | 9 (10) | 8 (10) |",
	} {
		if !strings.Contains(md.String(), line) {
			t.Errorf("tables lack %q:\n%s", line, md.String())
		}
	}
}
