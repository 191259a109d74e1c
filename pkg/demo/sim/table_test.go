package sim

import (
	"math"
	"strings"
	"testing"
)

// The spread over seeds is the sample standard deviation (the seeds are a
// sample), as the churn summary's; one seed shows no spread at all.
func TestSummarizeSampleStd(t *testing.T) {
	runs := []Run{
		{Trace: "default", Target: "gputopo", Seed: 1, Unallocated: 1},
		{Trace: "default", Target: "gputopo", Seed: 2, Unallocated: 3},
		{Trace: "gpushare40", Target: "gputopo", Seed: 1, Unallocated: 5},
	}
	sums := Summarize(runs)
	if len(sums) != 2 || sums[0].Mean != 2 || math.Abs(sums[0].Std-math.Sqrt2) > 1e-12 {
		t.Fatalf("summaries %+v, want default at 2 ± √2", sums)
	}
	_, rows := Rows(sums, []string{"gputopo"})
	if got := rows[0][1]; got != "2.00 ± 1.41" {
		t.Errorf("two seeds: %q, want 2.00 ± 1.41", got)
	}
	if got := rows[1][1]; got != "5.00 (1 seed)" || strings.Contains(got, "±") {
		t.Errorf("one seed: %q, want 5.00 (1 seed)", got)
	}
}
