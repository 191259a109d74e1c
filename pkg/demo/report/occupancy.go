package report

import (
	"fmt"
	"strings"
)

// occupancyChart is the per-GPU grid: one panel per scheduler, each node a
// box, each NVLink domain a group of squares inside it, each square one GPU
// colored by its used fraction. Partly used squares are the fragmentation
// the schedulers differ on.
type occupancyChart struct {
	ID            string
	Width, Height float64
	Panels        []occupancyPanel
}

type occupancyPanel struct {
	Name, Slug, Stats string
	TitleY, StatsY    float64
	Legend            []swatch // the panel's color ramp, right-aligned on its title line
	Nodes             []nodeBox
}

type nodeBox struct {
	X, Y, W, H float64
	Title      string // tooltip: node, shape and every GPU's use
	Label      string // node name under the box, only for small clusters
	LabelX     float64
	LabelY     float64
	Domains    []domainBox
}

type domainBox struct {
	X, Y, W, H float64
	Cells      []cell
}

type cell struct {
	X, Y, S float64
	Fill    string
}

type swatch struct {
	X, Y        float64
	Fill, Label string
}

const (
	freeColor = "#dde3ea"
	// fullUse counts a GPU as full: shares summed in floating point
	// (0.3 + 0.7) can land a hair under 1.
	fullUse = 0.999
)

// gpuFill colors a used fraction: free is neutral gray, any use starts at a
// clear tint of the scheduler's color so that a 5% share stands out from
// free, and a full GPU is the solid color.
func gpuFill(base string, used float64) string {
	switch {
	case !finite(used) || used <= 0:
		return freeColor
	case used >= fullUse:
		return base
	default:
		return mix(freeColor, base, 0.3+0.55*used)
	}
}

func occupancy(rs []Result, width float64) occupancyChart {
	c := occupancyChart{ID: "chart-occupancy", Width: width}
	// One geometry for all panels, sized by the largest cluster, so that
	// the panels compare square for square.
	gpus, nodes := 0, 0
	for _, r := range rs {
		g, n := 0, 0
		for _, node := range r.Nodes {
			n++
			for _, d := range node.Domains {
				g += len(d.GPUs)
			}
		}
		gpus, nodes = max(gpus, g), max(nodes, n)
	}
	s := 20.0
	switch {
	case gpus > 1024:
		s = 6
	case gpus > 256:
		s = 9
	case gpus > 64:
		s = 12
	}
	gap := max(1, s/8)
	labels := nodes <= 32

	y := 0.0
	slugs := slugs(rs)
	for i, r := range rs {
		p := occupancyPanel{Name: r.Name, Slug: slugs[i], TitleY: y + 16}
		for k, v := range []float64{0, 0.25, 0.5, 0.75, 1} {
			label := fmt.Sprintf("%d%%", int(v*100))
			switch v {
			case 0:
				label = "free"
			case 1:
				label = "full"
			}
			p.Legend = append(p.Legend, swatch{X: width - float64(5-k)*58, Y: y + 6, Fill: gpuFill(color(i), v), Label: label})
		}
		p.StatsY = y + 33
		y += 44
		x, rowH := 0.0, 0.0
		for _, node := range r.Nodes {
			b := layoutNode(node, color(i), s, gap, labels)
			if b == nil {
				continue
			}
			if x > 0 && x+b.W > width {
				x, y = 0, y+rowH+6
				rowH = 0
			}
			b.shift(x, y)
			p.Nodes = append(p.Nodes, *b)
			x += b.W + 6
			rowH = max(rowH, b.H+labelH(labels))
		}
		p.Stats = gpuStats(r.Nodes)
		y += rowH + 18
		c.Panels = append(c.Panels, p)
	}
	c.Height = y
	return c
}

// gpuStats sums a panel up in words: how many GPUs are full, partly used
// (the fragmentation) and free, and the share of capacity in use.
func gpuStats(nodes []NodeUse) string {
	full, partial, free, total, used := 0, 0, 0, 0, 0.0
	for _, n := range nodes {
		for _, d := range n.Domains {
			for _, u := range d.GPUs {
				total++
				switch {
				case !finite(u) || u <= 0:
					free++
				case u >= fullUse:
					full++
					used++
				default:
					partial++
					used += u
				}
			}
		}
	}
	if total == 0 {
		return "no GPU nodes reported"
	}
	return fmt.Sprintf("%s GPUs · %s full · %s partly used · %s free · %s of GPU capacity in use",
		count(total), count(full), count(partial), count(free), percent(100*used/float64(total)))
}

func labelH(labels bool) float64 {
	if labels {
		return 14
	}
	return 0
}

// layoutNode lays a node out at the origin: domains side by side, the GPUs
// of each in columns of two, so that 8 GPUs take four columns whether they
// are one NVSwitch domain, two of four or four pairs, and the gaps between
// domains show the grouping. A node without GPUs is not drawn.
func layoutNode(n NodeUse, base string, s, gap float64, labels bool) *nodeBox {
	const pad, domGap = 3.0, 4.0
	b := &nodeBox{}
	x := pad
	var uses []string
	for _, d := range n.Domains {
		if len(d.GPUs) == 0 {
			continue
		}
		rows := min(2, len(d.GPUs))
		cols := (len(d.GPUs) + 1) / 2
		db := domainBox{X: x - 1, Y: pad - 1, W: float64(cols)*(s+gap) - gap + 2, H: float64(rows)*(s+gap) - gap + 2}
		var u []string
		for k, v := range d.GPUs {
			db.Cells = append(db.Cells, cell{X: x + float64(k/2)*(s+gap), Y: pad + float64(k%2)*(s+gap), S: s, Fill: gpuFill(base, v)})
			if !finite(v) {
				v = 0
			}
			u = append(u, fmt.Sprintf("%.0f%%", 100*min(max(v, 0), 1)))
		}
		b.Domains = append(b.Domains, db)
		uses = append(uses, d.Name+": "+strings.Join(u, " "))
		x += db.W - 2 + domGap
	}
	if len(b.Domains) == 0 {
		return nil
	}
	b.W = x - domGap + pad
	b.H = 2*pad + 2*s + gap
	title := n.Name
	if n.Shape != "" {
		title += " (" + n.Shape + ")"
	}
	b.Title = title + "\n" + strings.Join(uses, "\n")
	if labels {
		b.Label = truncate(n.Name, 18)
		if w := 6.2*float64(len([]rune(b.Label))) + 4; w > b.W {
			// Widen the box for its label and keep the GPUs centered in it.
			b.shift((w-b.W)/2, 0)
			b.X, b.W = 0, w
		}
		b.LabelX, b.LabelY = b.W/2, b.H+11
	}
	return b
}

// shift moves a node laid out at the origin to (dx, dy).
func (b *nodeBox) shift(dx, dy float64) {
	b.X, b.Y = dx, dy
	b.LabelX += dx
	b.LabelY += dy
	for i := range b.Domains {
		d := &b.Domains[i]
		d.X += dx
		d.Y += dy
		for k := range d.Cells {
			d.Cells[k].X += dx
			d.Cells[k].Y += dy
		}
	}
}
