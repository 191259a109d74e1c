// Package report turns a scheduler comparison run into a terminal summary
// and a self-contained HTML page with inline SVG charts, so that a person
// looks at occupancy, fragmentation and link locality instead of reading
// logs. It is pure Go (html/template, no scripts, fonts or stylesheets from
// elsewhere) so the page opens offline and from a CI artifact.
package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is one comparison run.
type Report struct {
	Title, Scenario string
	Generated       time.Time
	Schedulers      []Result  // typically "gputopo" and "in-tree (first-fit)"
	Published       []Figure  // reference figures shown next to ours; may be empty
	Tables          []Table   // further tables, each in its own section
	Racks           []RackMap // racks and trays per scheduler, drawn side by side; may be empty
	Notes           []string
	// SideBySide: the schedulers ran at once, step by step on one clock
	// (the demo's default scenario), so they share one duration and a
	// rate per scheduler would only restate pods placed.
	SideBySide bool
}

// Table is a table of its own, such as every openb trace's figure per
// scheduler next to the published ones.
type Table struct {
	Caption string
	Head    []string
	Rows    [][]string
}

// Figure is one labelled number, such as a published reference.
type Figure struct {
	Label string
	Value float64
	Unit  string
}

// Result is what one scheduler did with the workload.
type Result struct {
	Name                  string
	PodsPlaced            int
	PodsPending           int
	Duration              time.Duration
	PodsPerSecond         float64
	UnallocatedGPUPercent float64        // at arrived = 100%, or see EndArrivedPercent
	Curve                 []Point        // unallocated GPU % as the workload arrives
	LinkClasses           map[string]int // link class of multi-GPU claims -> claims
	LinkClassOrder        []string       // best first, the charts' order
	Nodes                 []NodeUse      // GPU occupancy at the end of the run
	Pending               map[string]int // pending reason -> pods
	Extra                 []Figure       // e.g. "MIG requests served before first rejection"
	// EndArrivedPercent, when above 0: UnallocatedGPUPercent was read at
	// the end of a workload whose pods asked for that share of the GPUs
	// (the demo's own workloads), not at 100% arrived.
	EndArrivedPercent float64
	// Snapshot: a cluster's state at one moment (kubectl gputopo
	// report), not a run: no rate, duration or arrival curve, and the
	// unallocated share is the current one.
	Snapshot bool
}

// Point is one sample of the curve, both coordinates in percent.
type Point struct{ ArrivedPercent, UnallocatedPercent float64 }

// NodeUse is one node's GPUs, grouped by NVLink domain.
type NodeUse struct {
	Name, Shape string
	Domains     []DomainUse
}

// DomainUse is one NVLink domain; GPUs holds each GPU's used fraction, 0..1.
type DomainUse struct {
	Name string
	GPUs []float64
}

// palette gives each scheduler, by position, the same color in every chart
// and card: the first two are the comparison pair, the rest only guard
// against reports with more schedulers.
var palette = []string{"#2563eb", "#ea580c", "#0d9488", "#9333ea", "#ca8a04", "#db2777"}

func color(i int) string { return palette[i%len(palette)] }

// linkClasses is the chart order: the first result's order that names a
// class, then classes only some result has, alphabetically, so that no
// count is dropped.
func linkClasses(rs []Result) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		for _, c := range r.LinkClassOrder {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	var rest []string
	for _, r := range rs {
		for c := range r.LinkClasses {
			if !seen[c] {
				seen[c] = true
				rest = append(rest, c)
			}
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// pendingReasons lists every reason once, most pods first over all
// results, ties alphabetically so that the order is the same every run.
func pendingReasons(rs []Result) []string {
	total := map[string]int{}
	for _, r := range rs {
		for reason, n := range r.Pending {
			total[reason] += n
		}
	}
	out := slices.Collect(maps.Keys(total))
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(total[b], total[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return out
}

// number prints a figure with at most two decimals and no trailing zeros;
// NaN and infinities (a run that never got there) print as "n/a".
func number(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// percent prints a percentage with exactly two decimals, so that columns of
// them line up.
func percent(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "%"
}

func withUnit(f Figure) string {
	s := number(f.Value)
	switch {
	case s == "n/a" || f.Unit == "":
		return s
	case f.Unit == "%":
		return s + "%"
	default:
		return s + " " + f.Unit
	}
}

// count prints an integer with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func rate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func duration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// slug makes a scheduler name usable in ids and data attributes:
// "in-tree (first-fit)" -> "in-tree-first-fit".
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "scheduler"
	}
	return b.String()
}

// slugs gives each result a distinct slug, suffixing repeats ("a", "a-2").
func slugs(rs []Result) []string {
	out := make([]string, len(rs))
	taken := map[string]bool{}
	for i, r := range rs {
		base := slug(r.Name)
		s := base
		for n := 2; taken[s]; n++ {
			s = base + "-" + strconv.Itoa(n)
		}
		taken[s] = true
		out[i] = s
	}
	return out
}

// unallocatedWhen says when the schedulers' unallocated share was read:
// "at 100% arrived", or at the end of the workload.
func unallocatedWhen(rs []Result) string {
	if len(rs) == 0 || rs[0].EndArrivedPercent <= 0 {
		return "at 100% arrived"
	}
	return fmt.Sprintf("at the end (%s arrived)", percent(rs[0].EndArrivedPercent))
}
