package report

import (
	"math"
	"strings"
)

// lineChart is the geometry of the unallocated-GPU chart, computed here so
// that the template only places elements.
type lineChart struct {
	ID, Title            string
	Width, Height        float64
	X0, Y0, X1, Y1       float64 // plot area
	XTicks, YTicks       []tick
	XLabel, YLabel       string
	Series               []lineSeries
	Refs                 []refLine
	Arrived100           float64 // x of arrived = 100%, 0 when out of range
	LegendY, LegendRefsX float64
}

type tick struct {
	Pos   float64
	Label string
}

type lineSeries struct {
	Index             int // palette index, for the CSS class of its label
	Name, Slug, Color string
	Path              string
	// The headline dot at arrived = 100% and its label, when in range.
	Dot                bool
	DotX, DotY, LabelY float64
	Label              string
	LegendX            float64
}

type refLine struct {
	Y, LabelY   float64
	Label, Full string // Label fits the margin; Full is the tooltip
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// unallocatedChart plots every result's curve from arrived xmin on, with the
// published figures in % as horizontal reference lines. y covers what the
// plotted data and references reach, so the zoomed chart near 100% arrived
// shows differences of a few points that the full chart flattens.
func unallocatedChart(id, title string, rs []Result, refs []Figure, xmin float64, width float64) lineChart {
	c := lineChart{ID: id, Title: title, Width: width, Height: 380,
		XLabel: "workload arrived (% of GPU capacity)", YLabel: "unallocated GPU (%)"}
	right := 24.0
	if len(refs) > 0 {
		right = 192 // room for the reference labels
	}
	c.X0, c.Y0, c.X1, c.Y1 = 56, 44, width-right, c.Height-52

	var pct []Figure
	for _, f := range refs {
		if f.Unit == "%" && finite(f.Value) {
			pct = append(pct, f)
		}
	}
	xs, ys := c.axes(rs, pct, xmin)
	c.addSeries(rs, xs, ys)
	c.addRefs(pct, ys)
	c.layoutLegend()
	return c
}

// axes fits the x axis to the curves from xmin on and the y axis to what
// the visible points, the final figures and the references reach, and
// sets the ticks.
func (c *lineChart) axes(rs []Result, pct []Figure, xmin float64) (xs, ys span) {
	xmax := 100.0
	for _, r := range rs {
		for _, p := range r.Curve {
			if finite(p.ArrivedPercent) {
				xmax = max(xmax, p.ArrivedPercent)
			}
		}
	}
	xstep := niceStep(xmax-xmin, 7)
	xmax = ceilTo(xmax, xstep)
	ymin, ymax := 0.0, 0.0
	for _, r := range rs {
		for _, p := range visible(r.Curve, xmin, xmax) {
			ymin, ymax = min(ymin, p.UnallocatedPercent), max(ymax, p.UnallocatedPercent)
		}
		if finite(r.UnallocatedGPUPercent) {
			ymin, ymax = min(ymin, r.UnallocatedGPUPercent), max(ymax, r.UnallocatedGPUPercent)
		}
	}
	for _, f := range pct {
		ymax = max(ymax, f.Value)
	}
	if ymax <= ymin {
		ymax = ymin + 10
	}
	ystep := niceStep(ymax-ymin, 5)
	ymax = ceilTo(ymax, ystep)
	ymin = math.Floor(ymin/ystep) * ystep
	xs = span{xmin, xmax, c.X0, c.X1}
	ys = span{ymin, ymax, c.Y1, c.Y0}
	for _, v := range ticks(xmin, xmax, xstep) {
		c.XTicks = append(c.XTicks, tick{xs.at(v), number(v) + "%"})
	}
	for _, v := range ticks(ymin, ymax, ystep) {
		c.YTicks = append(c.YTicks, tick{ys.at(v), number(v) + "%"})
	}
	if xmin <= 100 && 100 <= xmax {
		c.Arrived100 = xs.at(100)
	}
	return xs, ys
}

// addSeries draws each result's curve with a dot and label at 100%
// arrived; the labels sit left of the 100% line, spread so they never
// overlap.
func (c *lineChart) addSeries(rs []Result, xs, ys span) {
	slugs := slugs(rs)
	var dotY []float64
	for i, r := range rs {
		s := lineSeries{Index: i % len(palette), Name: r.Name, Slug: slugs[i], Color: color(i), Path: linePath(r.Curve, xs, ys)}
		if c.Arrived100 != 0 && finite(r.UnallocatedGPUPercent) {
			s.Dot, s.DotX, s.DotY = true, c.Arrived100, ys.at(r.UnallocatedGPUPercent)
			s.Label = percent(r.UnallocatedGPUPercent)
			dotY = append(dotY, s.DotY)
		}
		c.Series = append(c.Series, s)
	}
	labelY := spread(dotY, 14, c.Y0+8, c.Y1-4)
	for i, k := 0, 0; i < len(c.Series); i++ {
		if c.Series[i].Dot {
			c.Series[i].LabelY = labelY[k] + 4
			k++
		}
	}
}

// addRefs draws the published figures as horizontal lines with labels.
func (c *lineChart) addRefs(pct []Figure, ys span) {
	var refY []float64
	for _, f := range pct {
		// The value leads so that truncating a long label never hides it.
		full := withUnit(f) + "  " + f.Label
		c.Refs = append(c.Refs, refLine{Y: ys.at(f.Value), Label: truncate(full, 30), Full: full})
		refY = append(refY, ys.at(f.Value))
	}
	for i, y := range spread(refY, 13, c.Y0, c.Y1) {
		c.Refs[i].LabelY = y + 4
	}
}

// layoutLegend puts the legend along the top: one entry per series, then
// the reference style.
func (c *lineChart) layoutLegend() {
	c.LegendY = 22
	x := c.X0
	for i := range c.Series {
		c.Series[i].LegendX = x
		x += 34 + 7*float64(len([]rune(c.Series[i].Name)))
	}
	c.LegendRefsX = x
}

// visible keeps the points with xmin <= arrived <= xmax.
func visible(pts []Point, xmin, xmax float64) []Point {
	var out []Point
	for _, p := range pts {
		if finite(p.ArrivedPercent) && finite(p.UnallocatedPercent) && p.ArrivedPercent >= xmin && p.ArrivedPercent <= xmax {
			out = append(out, p)
		}
	}
	return out
}

// linePath draws the curve as SVG path data, clipped to the plot so that no
// stroke leaves the axes, and thinned to points at least half a pixel apart
// (a 1.3x openb run has over 10,000 outcomes for a few hundred pixels).
func linePath(pts []Point, xs, ys span) string {
	var b strings.Builder
	var last, pend [2]float64
	open, pending := false, false
	flush := func() {
		if pending {
			b.WriteString("L" + px(pend[0]) + " " + px(pend[1]))
			last, pending = pend, false
		}
	}
	for i := 1; i < len(pts); i++ {
		a, z := pts[i-1], pts[i]
		x0, y0, x1, y1, ok := clip(a.ArrivedPercent, a.UnallocatedPercent, z.ArrivedPercent, z.UnallocatedPercent, xs, ys)
		if !ok {
			flush()
			open = false
			continue
		}
		p0 := [2]float64{xs.at(x0), ys.at(y0)}
		p1 := [2]float64{xs.at(x1), ys.at(y1)}
		if !open || (x0 != a.ArrivedPercent || y0 != a.UnallocatedPercent) {
			// Entering the plot mid-segment starts a new stroke.
			flush()
			b.WriteString("M" + px(p0[0]) + " " + px(p0[1]))
			last, open = p0, true
		}
		pend, pending = p1, true
		if math.Abs(p1[0]-last[0]) >= 0.5 || math.Abs(p1[1]-last[1]) >= 0.5 {
			flush()
		}
		if x1 != z.ArrivedPercent || y1 != z.UnallocatedPercent {
			// Left the plot: the next visible part is a new stroke.
			flush()
			open = false
		}
	}
	flush()
	return b.String()
}

// clip cuts the segment (ax,ay)-(bx,by) to the spans' data ranges
// (Liang-Barsky); ok is false when nothing of it is inside or it is not a
// finite segment.
func clip(ax, ay, bx, by float64, xs, ys span) (x0, y0, x1, y1 float64, ok bool) {
	for _, v := range []float64{ax, ay, bx, by} {
		if !finite(v) {
			return 0, 0, 0, 0, false
		}
	}
	dx, dy := bx-ax, by-ay
	t0, t1 := 0.0, 1.0
	for _, e := range [][2]float64{
		{-dx, ax - xs.lo}, {dx, xs.hi - ax},
		{-dy, ay - ys.lo}, {dy, ys.hi - ay},
	} {
		p, q := e[0], e[1]
		if p == 0 {
			if q < 0 {
				return 0, 0, 0, 0, false
			}
			continue
		}
		r := q / p
		if p < 0 {
			t0 = max(t0, r)
		} else {
			t1 = min(t1, r)
		}
		if t0 > t1 {
			return 0, 0, 0, 0, false
		}
	}
	x0, y0, x1, y1 = ax+t0*dx, ay+t0*dy, ax+t1*dx, ay+t1*dy
	if t0 == 0 {
		x0, y0 = ax, ay
	}
	if t1 == 1 {
		x1, y1 = bx, by
	}
	return x0, y0, x1, y1, true
}
