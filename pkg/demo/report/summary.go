package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// WriteSummary writes the comparison as an aligned terminal table, one
// column per scheduler, followed by the published reference figures, the
// further tables, the rack maps as text and the notes.
func WriteSummary(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString(plain(heading(r)) + "\n")
	if !r.Generated.IsZero() {
		fmt.Fprintf(&b, "generated %s\n", r.Generated.UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")

	if len(r.Schedulers) > 0 {
		writeGrid(&b, r)
	}
	tables := append(slices.Clone(r.Tables), rackTables(r.Racks)...)
	if len(r.Published) > 0 {
		refs := Table{Caption: "published (reference)"}
		for _, f := range r.Published {
			refs.Rows = append(refs.Rows, []string{f.Label, withUnit(f)})
		}
		tables = append([]Table{refs}, tables...)
	}
	for _, t := range tables {
		if err := writeTable(&b, t); err != nil {
			return err
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", plain(n))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxLabelWidth bounds the label column: a longer label (a pending
// reason with its counts) wraps onto lines of its own below its figures,
// so that one long reason does not push every figure off an 80-column
// terminal.
const maxLabelWidth = 48

// writeGrid writes every figure per scheduler: labels left-aligned,
// figures right-aligned on their last digit, three spaces between
// columns; widths count runes, not bytes.
func writeGrid(b *strings.Builder, r Report) {
	grid := [][]string{append([]string{""}, names(r.Schedulers)...)}
	for _, row := range table(r, true) {
		grid = append(grid, append([]string{row.Label}, row.Cells...))
	}
	widths := make([]int, len(grid[0]))
	for _, row := range grid {
		for c := range row {
			row[c] = plain(row[c])
			widths[c] = max(widths[c], utf8.RuneCountInString(row[c]))
		}
	}
	widths[0] = min(widths[0], maxLabelWidth)
	for _, row := range grid {
		label := wrap(row[0], widths[0])
		line := label[0] + strings.Repeat(" ", widths[0]-utf8.RuneCountInString(label[0]))
		for c := 1; c < len(row); c++ {
			line += strings.Repeat(" ", 3+widths[c]-utf8.RuneCountInString(row[c])) + row[c]
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		for _, more := range label[1:] {
			b.WriteString("  " + more + "\n")
		}
	}
}

// wrap splits s at spaces into lines of at most width runes, the lines
// after the first two runes narrower (writeGrid indents them); a word
// longer than a line is cut.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		limit := width
		if len(lines) > 0 {
			limit = width - 2
		}
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= limit:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
			limit = width - 2
		}
		for utf8.RuneCountInString(line) > limit {
			cut := string([]rune(line)[:limit])
			lines = append(lines, cut)
			line = string([]rune(line)[limit:])
			limit = width - 2
		}
	}
	return append(lines, line)
}

func writeTable(b *strings.Builder, t Table) error {
	b.WriteString("\n" + plain(t.Caption) + "\n")
	tw := tabwriter.NewWriter(b, 0, 0, 3, ' ', 0)
	rows := t.Rows
	if len(t.Head) > 0 {
		rows = append([][]string{t.Head}, rows...)
	}
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = plain(c)
		}
		// A tabwriter over a strings.Builder: any error surfaces in Flush.
		_, _ = fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// plain replaces control characters (tabs, newlines, escape sequences in a
// pending reason copied from an event) with spaces: they would break the
// table's alignment or drive the terminal.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func heading(r Report) string {
	switch {
	case r.Title == "":
		return r.Scenario
	case r.Scenario == "":
		return r.Title
	default:
		return r.Title + " — " + r.Scenario
	}
}

func names(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// tableRow is one figure across the schedulers.
type tableRow struct {
	Label string
	Cells []string
}

// table is the figures both outputs print, one row each; the HTML page
// leaves the pending reasons to its own table (pending = false).
func table(r Report, pending bool) []tableRow {
	rs := r.Schedulers
	row := func(label string, cell func(Result) string) tableRow {
		t := tableRow{Label: label}
		for _, s := range rs {
			t.Cells = append(t.Cells, cell(s))
		}
		return t
	}
	rows := []tableRow{
		row("pods placed", func(s Result) string { return count(s.PodsPlaced) }),
		row("pods pending", func(s Result) string { return count(s.PodsPending) }),
	}
	if snapshots(rs) {
		rows = append(rows, row("unallocated GPU now", func(s Result) string { return percent(s.UnallocatedGPUPercent) }))
	} else {
		if r.SideBySide {
			rows = append(rows, row("duration (side by side, one clock)", func(s Result) string { return duration(s.Duration) }))
		} else {
			rows = append(rows,
				row("pods/s", func(s Result) string { return rate(s.PodsPerSecond) }),
				row("duration", func(s Result) string { return duration(s.Duration) }))
		}
		label := "unallocated GPU @100% arrived"
		if when := unallocatedWhen(rs); when != "at 100% arrived" {
			label = "unallocated GPU " + when
		}
		rows = append(rows, row(label, func(s Result) string { return percent(s.UnallocatedGPUPercent) }))
	}
	for _, c := range linkClasses(rs) {
		rows = append(rows, row("multi-GPU claims on "+c, func(s Result) string { return count(s.LinkClasses[c]) }))
	}
	if pending {
		for _, reason := range pendingReasons(rs) {
			rows = append(rows, row("pending: "+reason, func(s Result) string { return count(s.Pending[reason]) }))
		}
	}
	for _, label := range extraLabels(rs) {
		rows = append(rows, row(label, func(s Result) string {
			for _, e := range s.Extra {
				if e.Label == label {
					return withUnit(e)
				}
			}
			return "-"
		}))
	}
	return rows
}

// extraLabels lists the Extra figures' labels in first-seen order.
func extraLabels(rs []Result) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		for _, e := range r.Extra {
			if !seen[e.Label] {
				seen[e.Label] = true
				out = append(out, e.Label)
			}
		}
	}
	return out
}

// snapshots: every result is a cluster's state at one moment.
func snapshots(rs []Result) bool {
	for _, r := range rs {
		if !r.Snapshot {
			return false
		}
	}
	return len(rs) > 0
}
