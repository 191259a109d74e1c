package report

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestWriteSummary(t *testing.T) {
	tests := []struct {
		name string
		r    Report
		want string
	}{
		{"sample", sampleReport(), `gputopo vs first-fit — openb default, seed 1
generated 2026-07-01T12:30:00Z

                                             gputopo   in-tree (first-fit)
pods placed                                    9,812                 9,650
pods pending                                     120                   282
pods/s                                         797.7                 684.4
duration                                       12.3s                 14.1s
unallocated GPU @100% arrived                  5.12%                 8.90%
multi-GPU claims on nvlink                       310                   150
multi-GPU claims on numa                          40                   120
multi-GPU claims on system                         6                    86
pending: insufficient GPU                        100                   250
pending: gpu_spec <T4>                            20                    32
MIG requests served before first rejection       412                   355

published (reference)
  openb FGD (published)       4.77%
  openb BestFit (published)   7.14%

notes
  - Trace: Weng et al., ATC 2023 & Alibaba clusterdata <openb>.
`},
		{"one scheduler that never reached 100%, no references", Report{
			Scenario:   "short",
			Schedulers: []Result{{Name: "ü-sched", PodsPlaced: 1234567, Duration: 1500 * time.Microsecond, UnallocatedGPUPercent: math.NaN()}},
		}, `short

                                  ü-sched
pods placed                     1,234,567
pods pending                            0
pods/s                                0.0
duration                            1.5ms
unallocated GPU @100% arrived         n/a
`},
		{"control characters cannot break the table", Report{
			Title: "t\x1b[31m",
			Schedulers: []Result{
				{Name: "a\tb", Pending: map[string]int{"line1\nline2": 3}, Extra: []Figure{{Label: "only in a", Value: 1.5, Unit: "GiB"}}},
				{Name: "c"},
			},
		}, `t [31m

                                    a b       c
pods placed                           0       0
pods pending                          0       0
pods/s                              0.0     0.0
duration                             0s      0s
unallocated GPU @100% arrived     0.00%   0.00%
pending: line1 line2                  3       0
only in a                       1.5 GiB       -
`},
		{"side by side on one clock, a long pending reason wrapped under its figures", Report{
			Scenario:   "demo",
			SideBySide: true,
			Schedulers: []Result{
				{Name: "gputopo", PodsPlaced: 66, Duration: 10704 * time.Millisecond, Pending: map[string]int{"cannot allocate all claims (request gpu: needs 1, 16 match, 0 free (5 in use, 11 shared counters exhausted))": 1}},
				{Name: "in-tree", PodsPlaced: 65, Duration: 10704 * time.Millisecond},
			},
		}, `demo

                                                   gputopo   in-tree
pods placed                                             66        65
pods pending                                             0         0
duration (side by side, one clock)                 10.704s   10.704s
unallocated GPU @100% arrived                        0.00%     0.00%
pending: cannot allocate all claims (request             1         0
  gpu: needs 1, 16 match, 0 free (5 in use, 11
  shared counters exhausted))
`},
		{"a table of its own and no schedulers", Report{
			Title: "openb table",
			Tables: []Table{{Caption: "unallocated\tGPU", Head: []string{"trace", "gputopo", "FGD (published)"},
				Rows: [][]string{{"default", "4.99 ± 0.17", "4.77"}, {"gpuspec33", "12.31 ± 1.19", "12.16"}}}},
			Notes: []string{"n"},
		}, `openb table


unallocated GPU
  trace       gputopo        FGD (published)
  default     4.99 ± 0.17    4.77
  gpuspec33   12.31 ± 1.19   12.16

notes
  - n
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteSummary(&b, tc.r); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("WriteSummary:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestFormats(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"number trims zeros", number(13.70), "13.7"},
		{"number rounds to two decimals", number(4.7700001), "4.77"},
		{"number integer", number(412), "412"},
		{"number negative zero", number(-0.001), "0"},
		{"number NaN", number(math.NaN()), "n/a"},
		{"percent keeps two decimals", percent(8.9), "8.90%"},
		{"percent infinite", percent(math.Inf(1)), "n/a"},
		{"unit percent", withUnit(Figure{Value: 4.77, Unit: "%"}), "4.77%"},
		{"unit word", withUnit(Figure{Value: 2, Unit: "GPUs"}), "2 GPUs"},
		{"count small", count(999), "999"},
		{"count thousands", count(1234567), "1,234,567"},
		{"count negative", count(-1234), "-1,234"},
		{"duration sub-second", duration(1500 * time.Microsecond), "1.5ms"},
		{"duration seconds", duration(12345 * time.Millisecond), "12.345s"},
		{"slug parentheses", slug("in-tree (first-fit)"), "in-tree-first-fit"},
		{"slug symbols only", slug("<>&"), "scheduler"},
		{"slug published label", slug("openb FGD (published)"), "openb-fgd-published"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestSlugsAreDistinct(t *testing.T) {
	got := slugs([]Result{{Name: "gputopo"}, {Name: "GPUTopo"}, {Name: "gputopo-2"}, {Name: "x"}})
	want := []string{"gputopo", "gputopo-2", "gputopo-2-2", "x"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("slugs = %v, want %v", got, want)
	}
}

func TestOrders(t *testing.T) {
	rs := []Result{
		{LinkClassOrder: []string{"nvlink", "numa"}, LinkClasses: map[string]int{"nvlink": 1, "zeta": 1}, Pending: map[string]int{"b": 2, "a": 2, "c": 1}},
		{LinkClassOrder: []string{"numa", "system"}, LinkClasses: map[string]int{"alpha": 1}, Pending: map[string]int{"c": 5}},
	}
	if got, want := strings.Join(linkClasses(rs), ","), "nvlink,numa,system,alpha,zeta"; got != want {
		t.Errorf("linkClasses = %s, want %s", got, want)
	}
	// c has 6 pods in all; a and b tie at 2 and read alphabetically.
	if got, want := strings.Join(pendingReasons(rs), ","), "c,a,b"; got != want {
		t.Errorf("pendingReasons = %s, want %s", got, want)
	}
}

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		s     string
		width int
		want  []string
	}{
		{"", 10, []string{""}},
		{"short", 10, []string{"short"}},
		{"one two three four", 9, []string{"one two", "three", "four"}},
		{"abcdefghijklmnop", 6, []string{"abcdef", "ghij", "klmn", "op"}},
	} {
		got := wrap(tc.s, tc.width)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", tc.s, tc.width, got, tc.want)
		}
		for i, l := range got {
			limit := tc.width
			if i > 0 {
				limit -= 2
			}
			if len([]rune(l)) > limit {
				t.Errorf("wrap(%q, %d): line %q longer than %d", tc.s, tc.width, l, limit)
			}
		}
	}
}
