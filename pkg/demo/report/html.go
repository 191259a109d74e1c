package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"px":   px,
	"add":  func(a, b float64) float64 { return a + b },
	"half": func(a float64) float64 { return a / 2 },
	"inc":  func(n int) int { return n + 1 },
}).Parse(pageTemplate))

// Widths of the charts in SVG units: they fill a 1,280px page side by side
// and scale with it (width: 100%) on narrower screens.
const (
	curveWidth = 580
	zoomWidth  = 590
	fullWidth  = 1186
	barWidth   = 720
	zoomFrom   = 80 // the zoomed curve starts at this arrived %
)

// page is what the template renders: every number already formatted and
// every chart already laid out, so the template only places elements.
type page struct {
	Heading                 string
	Generated, GeneratedISO string
	Palette                 []string
	Lead                    string
	Cards                   []card
	Published               []published
	Curve, Zoom             lineChart
	HasZoom                 bool
	HasCurve                bool // a run with a workload; a live cluster's report has none
	Occupancy               occupancyChart
	Racks                   rackChart
	LinkClasses             barChart
	Schedulers              []column
	Pending                 []tableRow
	Table                   []tableRow
	Tables                  []Table
	Notes                   []string
}

type card struct {
	Index                                        int
	Name, Slug                                   string
	Unallocated, Placed, Pending, Rate, Duration string
	UnallocatedWhat                              string
	Snapshot                                     bool
	SideBySide                                   bool // one duration for all; no rate
}

type published struct{ Label, Slug, Value string }

type column struct {
	Index int
	Name  string
}

// WriteHTML writes the report as one self-contained HTML page: key figures
// as cards, then inline SVG charts of the unallocated GPU curve, GPU
// occupancy per node and NVLink domain, and link classes of multi-GPU
// claims, then the pending pods, the racks' trays colored by the pod group
// holding them, and every figure in a table. Every string
// from the report goes through html/template's escaping.
func WriteHTML(w io.Writer, r Report) error {
	p := page{
		Heading:     heading(r),
		Palette:     palette,
		Lead:        lead(r.Schedulers),
		Occupancy:   occupancy(r.Schedulers, fullWidth),
		Racks:       racks(r.Racks, r.Schedulers, fullWidth),
		LinkClasses: linkClassChart(r.Schedulers, barWidth),
		Table:       table(r, false),
		Tables:      r.Tables,
		Notes:       r.Notes,
	}
	if p.Heading == "" {
		p.Heading = "GPU scheduling report"
	}
	if !r.Generated.IsZero() {
		p.Generated = r.Generated.UTC().Format("2006-01-02 15:04 MST")
		p.GeneratedISO = r.Generated.UTC().Format(time.RFC3339)
	}
	// Zoom only when a run got well past the zoom's start: otherwise there
	// is nothing near 100% arrived to enlarge.
	for _, s := range r.Schedulers {
		p.HasCurve = p.HasCurve || len(s.Curve) > 0
		for _, pt := range s.Curve {
			if pt.ArrivedPercent >= zoomFrom+10 {
				p.HasZoom = true
			}
		}
	}
	// The published references sit within a few points of the curves'
	// end, so they go on the zoomed chart; the whole-run chart carries
	// them only when there is no zoom.
	if p.HasZoom {
		p.Curve = unallocatedChart("chart-unallocated", "Whole run", r.Schedulers, nil, 0, curveWidth)
		p.Zoom = unallocatedChart("chart-unallocated-zoom", "Around 100% arrived", r.Schedulers, r.Published, zoomFrom, zoomWidth)
	} else {
		p.Curve = unallocatedChart("chart-unallocated", "Whole run", r.Schedulers, r.Published, 0, curveWidth+zoomWidth)
	}
	slugs := slugs(r.Schedulers)
	for i, s := range r.Schedulers {
		p.Cards = append(p.Cards, card{
			Index: i % len(palette), Name: s.Name, Slug: slugs[i],
			Unallocated: percent(s.UnallocatedGPUPercent), Placed: count(s.PodsPlaced),
			Pending: count(s.PodsPending), Rate: rate(s.PodsPerSecond), Duration: duration(s.Duration),
			UnallocatedWhat: "GPU capacity unallocated " + unallocatedWhen(r.Schedulers), Snapshot: s.Snapshot, SideBySide: r.SideBySide,
		})
		if s.Snapshot {
			p.Cards[len(p.Cards)-1].UnallocatedWhat = "GPU capacity unallocated now"
		}
		p.Schedulers = append(p.Schedulers, column{Index: i % len(palette), Name: s.Name})
	}
	for _, f := range r.Published {
		p.Published = append(p.Published, published{Label: f.Label, Slug: slug(f.Label), Value: withUnit(f)})
	}
	for _, reason := range pendingReasons(r.Schedulers) {
		row := tableRow{Label: reason}
		for _, s := range r.Schedulers {
			row.Cells = append(row.Cells, count(s.Pending[reason]))
		}
		p.Pending = append(p.Pending, row)
	}
	// Render to memory first: a template error must not leave half a page.
	var b strings.Builder
	if err := tmpl.Execute(&b, p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// lead is the one sentence a reader wants first: how much GPU capacity the
// first scheduler leaves unallocated at 100% arrived (or the workload's
// end), against each other one.
func lead(rs []Result) string {
	if len(rs) < 2 || !finite(rs[0].UnallocatedGPUPercent) {
		return ""
	}
	a := rs[0]
	var parts []string
	for _, b := range rs[1:] {
		if !finite(b.UnallocatedGPUPercent) {
			continue
		}
		d := b.UnallocatedGPUPercent - a.UnallocatedGPUPercent
		switch {
		case math.Abs(d) < 0.005:
			parts = append(parts, fmt.Sprintf("the same as %s", b.Name))
		case d > 0:
			parts = append(parts, fmt.Sprintf("%s points less than %s at %s", number(d), b.Name, percent(b.UnallocatedGPUPercent)))
		default:
			parts = append(parts, fmt.Sprintf("%s points more than %s at %s", number(-d), b.Name, percent(b.UnallocatedGPUPercent)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	when := "When the arrived pods ask for 100% of the cluster's GPUs"
	if a.EndArrivedPercent > 0 {
		when = fmt.Sprintf("When the workload ends (its pods asked for %s of the cluster's GPUs)", percent(a.EndArrivedPercent))
	}
	return fmt.Sprintf("%s, %s leaves %s of GPU capacity unallocated: %s.",
		when, a.Name, percent(a.UnallocatedGPUPercent), strings.Join(parts, "; "))
}
