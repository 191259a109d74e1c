package sim

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/gputopo/gputopo/pkg/demo/report"
)

// churnCell gathers one stream's runs of one target, seed by seed.
type churnCell struct {
	runs []ChurnRun
}

func (c churnCell) mean(f func(ChurnRun) float64) float64 {
	if len(c.runs) == 0 {
		return 0
	}
	sum := 0.0
	for _, r := range c.runs {
		sum += f(r)
	}
	return sum / float64(len(c.runs))
}

func (c churnCell) span(f func(ChurnRun) int) string {
	lo, hi := f(c.runs[0]), f(c.runs[0])
	for _, r := range c.runs {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	return fmt.Sprintf("%.1f (%d–%d)", c.mean(func(r ChurnRun) float64 { return float64(f(r)) }), lo, hi)
}

// churnCells groups runs by stream and target copy; streams in first-seen
// order.
func churnCells(runs []ChurnRun) ([]string, map[[2]string]*churnCell) {
	var streams []string
	cells := map[[2]string]*churnCell{}
	for _, r := range runs {
		if _, ok := cells[[2]string{r.Stream, ""}]; !ok {
			streams = append(streams, r.Stream)
			cells[[2]string{r.Stream, ""}] = &churnCell{}
		}
		k := [2]string{r.Stream, r.Target.Copy}
		if cells[k] == nil {
			cells[k] = &churnCell{}
		}
		cells[k].runs = append(cells[k].runs, r)
	}
	return streams, cells
}

// ChurnTables are the churn results as tables: per stream the measures
// of each target (mean over the seeds, range), and the seeds on which
// the first target served at least as many as each other one; then per
// stream and kind the jobs that arrived and each target served.
func ChurnTables(runs []ChurnRun, targets []string, copies []string) []report.Table {
	streams, cells := churnCells(runs)
	measures := []struct {
		name string
		cell func(*churnCell) string
	}{
		{"jobs served", func(c *churnCell) string { return c.span(func(r ChurnRun) int { return r.Served }) }},
		{"served before the first rejection", func(c *churnCell) string {
			return c.span(func(r ChurnRun) int { return r.ServedBeforeRejection })
		}},
		{"multi-GPU claims at their node's best link class, %", func(c *churnCell) string {
			multi, best := 0, 0
			for _, r := range c.runs {
				multi, best = multi+r.MultiGPU, best+r.AtBestLink
			}
			if multi == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f (%d claims)", 100*float64(best)/float64(multi), multi)
		}},
		{"GPUs held, time-averaged, %", func(c *churnCell) string {
			return fmt.Sprintf("%.1f", c.mean(func(r ChurnRun) float64 { return r.AllocatedPercent }))
		}},
		{"jobs rejected", func(c *churnCell) string { return c.span(func(r ChurnRun) int { return r.Jobs - r.Served }) }},
		{"of them with as many GPUs free in the fleet as asked for", func(c *churnCell) string {
			return c.span(func(r ChurnRun) int { return r.RejectedWithRoom })
		}},
	}
	main := report.Table{
		Caption: "Churn streams: jobs arrive and leave, each tried once; mean over the seeds (range)",
		Head:    append([]string{"stream", "measure"}, targets...),
	}
	for _, st := range streams {
		for _, m := range measures {
			row := []string{st, m.name}
			for _, cp := range copies {
				if c := cells[[2]string{st, cp}]; c != nil {
					row = append(row, m.cell(c))
				} else {
					row = append(row, "")
				}
			}
			main.Rows = append(main.Rows, row)
		}
		if len(copies) > 1 {
			main.Rows = append(main.Rows, seedsAtLeast(st, cells, copies, targets), servedDifference(st, cells, copies, targets))
		}
	}
	return []report.Table{main, churnKinds(streams, cells, targets, copies)}
}

// seedsAtLeast is the row of seeds on which copies[0] served at least as
// many jobs, and as many before the first rejection, as every other.
func seedsAtLeast(st string, cells map[[2]string]*churnCell, copies, names []string) []string {
	return againstOthers(st, "at least as many served (in total / before the first rejection)", cells, copies, names, func(pairs [][2]ChurnRun) string {
		total, before := 0, 0
		for _, p := range pairs {
			if p[0].Served >= p[1].Served {
				total++
			}
			if p[0].ServedBeforeRejection >= p[1].ServedBeforeRejection {
				before++
			}
		}
		return fmt.Sprintf("%d / %d of %d seeds", total, before, len(pairs))
	})
}

// servedDifference is the row of how many more jobs copies[0] served
// than each other target, seed by seed: the mean and its standard error,
// which says whether a difference is more than the seeds' noise.
func servedDifference(st string, cells map[[2]string]*churnCell, copies, names []string) []string {
	return againstOthers(st, "more jobs served, per seed (mean ± standard error)", cells, copies, names, func(pairs [][2]ChurnRun) string {
		diffs := make([]float64, len(pairs))
		for i, p := range pairs {
			diffs[i] = float64(p[0].Served - p[1].Served)
		}
		return meanAndError(diffs)
	})
}

// againstOthers is a row comparing copies[0]'s runs of stream st with
// each other target's of the same seeds: verdict's word on each pairing,
// named by the target's name (names, in copies' order), in copies[0]'s
// column; the other columns stay empty.
func againstOthers(st, measure string, cells map[[2]string]*churnCell, copies, names []string, verdict func([][2]ChurnRun) string) []string {
	var verdicts []string
	if first := cells[[2]string{st, copies[0]}]; first != nil {
		for i, cp := range copies[1:] {
			if other := cells[[2]string{st, cp}]; other != nil {
				verdicts = append(verdicts, verdict(pairedBySeed(first, other))+" against "+names[i+1])
			}
		}
	}
	row := []string{st, measure, strings.Join(verdicts, "; ")}
	return append(row, make([]string, len(copies)-1)...)
}

// pairedBySeed pairs a's runs with b's of the same seed, in a's order;
// seeds only one of them ran are left out.
func pairedBySeed(a, b *churnCell) [][2]ChurnRun {
	bySeed := map[uint64]ChurnRun{}
	for _, r := range b.runs {
		bySeed[r.Seed] = r
	}
	var out [][2]ChurnRun
	for _, r := range a.runs {
		if o, ok := bySeed[r.Seed]; ok {
			out = append(out, [2]ChurnRun{r, o})
		}
	}
	return out
}

// meanAndError formats the mean of xs with its standard error (the
// sample standard deviation over the square root of the count).
func meanAndError(xs []float64) string {
	n := float64(len(xs))
	if n == 0 {
		return "no common seeds"
	}
	m := mean(xs)
	if len(xs) == 1 {
		return fmt.Sprintf("%+.1f (1 seed)", m)
	}
	return fmt.Sprintf("%+.1f ± %.1f", m, sampleStd(xs)/math.Sqrt(n))
}

func churnKinds(streams []string, cells map[[2]string]*churnCell, targets, copies []string) report.Table {
	t := report.Table{
		Caption: "Jobs served per kind, summed over the seeds (arrived in brackets)",
		Head:    append([]string{"stream", "kind"}, targets...),
	}
	for _, st := range streams {
		var first *churnCell
		for _, cp := range copies {
			if c := cells[[2]string{st, cp}]; c != nil {
				first = c
				break
			}
		}
		if first == nil {
			continue
		}
		for k, kc := range first.runs[0].Kinds {
			row := []string{st, kc.Kind}
			for _, cp := range copies {
				c := cells[[2]string{st, cp}]
				if c == nil {
					row = append(row, "")
					continue
				}
				arrived, served := 0, 0
				for _, r := range c.runs {
					arrived, served = arrived+r.Kinds[k].Arrived, served+r.Kinds[k].Served
				}
				row = append(row, fmt.Sprintf("%d (%d)", served, arrived))
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// WriteTablesMarkdown writes tables as Markdown, each under its caption.
func WriteTablesMarkdown(w io.Writer, tables []report.Table) error {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "%s\n\n| %s |\n|%s\n", t.Caption, strings.Join(t.Head, " | "), strings.Repeat("---|", len(t.Head)))
		for _, row := range t.Rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
