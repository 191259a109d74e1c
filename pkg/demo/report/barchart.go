package report

// barChart is the grouped bar chart of link classes: one group per class,
// one bar per scheduler.
type barChart struct {
	ID             string
	Width, Height  float64
	X0, Y0, X1, Y1 float64
	YTicks         []tick
	Groups         []barGroup
	Legend         []legendEntry
	Empty          bool // no multi-GPU claims at all: say so instead of drawing axes
}

type barGroup struct {
	Label  string
	LabelX float64
	Bars   []bar
}

type bar struct {
	X, Y, W, H   float64
	Color, Value string
	Title        string
	ValueY       float64
}

type legendEntry struct {
	X           float64
	Name, Color string
}

func linkClassChart(rs []Result, width float64) barChart {
	c := barChart{ID: "chart-linkclass", Width: width, Height: 300}
	c.X0, c.Y0, c.X1, c.Y1 = 56, 44, width-16, c.Height-40
	classes := linkClasses(rs)
	peak, totals := 0, make([]int, len(rs))
	for i, r := range rs {
		for _, cl := range classes {
			peak = max(peak, r.LinkClasses[cl])
			totals[i] += r.LinkClasses[cl]
		}
	}
	x := c.X0
	for i, r := range rs {
		c.Legend = append(c.Legend, legendEntry{X: x, Name: r.Name, Color: color(i)})
		x += 34 + 7*float64(len([]rune(r.Name)))
	}
	if peak == 0 || len(rs) == 0 {
		c.Empty = true
		return c
	}
	step := niceStep(float64(peak)*1.1, 5)
	top := ceilTo(float64(peak)*1.1, step)
	ys := span{0, top, c.Y1, c.Y0}
	for _, v := range ticks(0, top, step) {
		c.YTicks = append(c.YTicks, tick{ys.at(v), count(int(v))})
	}
	groupW := (c.X1 - c.X0) / float64(len(classes))
	barW := min(48, groupW*0.7/float64(len(rs)))
	for g, cl := range classes {
		left := c.X0 + float64(g)*groupW + (groupW-barW*float64(len(rs)))/2
		grp := barGroup{Label: cl, LabelX: c.X0 + (float64(g)+0.5)*groupW}
		for i, r := range rs {
			n := r.LinkClasses[cl]
			y := ys.at(float64(n))
			share := ""
			if totals[i] > 0 {
				share = " (" + percent(100*float64(n)/float64(totals[i])) + " of its multi-GPU claims)"
			}
			grp.Bars = append(grp.Bars, bar{
				X: left + float64(i)*barW + 1, Y: y, W: barW - 2, H: c.Y1 - y,
				Color: color(i), Value: count(n), ValueY: y - 5,
				Title: r.Name + ": " + count(n) + " claims on " + cl + share,
			})
		}
		c.Groups = append(c.Groups, grp)
	}
	return c
}
