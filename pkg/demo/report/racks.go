package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RackMap is one scheduler's racks at the end of a run: every tray and the
// pod group holding it. The page draws the maps side by side, each group in
// its own color; the terminal summary prints them as text.
type RackMap struct {
	Scheduler string
	Racks     []Rack
}

// Rack is one NVLink domain of trays, such as a GB200 NVL72 rack: its
// name, its clique (NVIDIA's <ClusterUUID>.<CliqueId>) and its trays in
// order.
type Rack struct {
	Name, Clique string
	Trays        []Tray
}

// Tray is one node of a rack and the group whose pod holds it; Group is ""
// when the tray is free.
type Tray struct {
	Node, Group string
}

// groupPalette colors pod groups: categorical, muted so that no group
// reads as a scheduler's color (palette), and none near freeColor. More
// groups than colors repeat them; the trays then tell them apart by the
// name printed on them and in their tooltips.
var groupPalette = []string{
	"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2",
	"#edc948", "#ff9da7", "#9c755f", "#a0cbe8", "#8cd17d", "#ffbe7d",
}

// groupColors gives every group holding a tray in any map one color, the
// same in every panel: the groups sorted by name (digits as numbers) take
// the palette in turn, so colors follow the names, not where the groups
// landed.
func groupColors(maps []RackMap) ([]string, map[string]string) {
	seen := map[string]bool{}
	var names []string
	for _, m := range maps {
		for _, r := range m.Racks {
			for _, t := range r.Trays {
				if t.Group != "" && !seen[t.Group] {
					seen[t.Group] = true
					names = append(names, t.Group)
				}
			}
		}
	}
	slices.SortFunc(names, naturalCompare)
	colors := make(map[string]string, len(names))
	for i, g := range names {
		colors[g] = groupPalette[i%len(groupPalette)]
	}
	return names, colors
}

// naturalCompare orders names with their digit runs as numbers, so that
// job-2 comes before job-10.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		ra, sa := utf8.DecodeRuneInString(a)
		rb, sb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return int(ra) - int(rb)
		}
		a, b = a[sa:], b[sb:]
	}
	if c := len(a) - len(b); c != 0 {
		return c
	}
	return 0
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// rackChart is the racks drawn side by side per scheduler: each rack a
// column of its trays, each tray filled with its group's color.
type rackChart struct {
	ID            string
	Width, Height float64
	Legend        []swatch // one per group, then free
	Panels        []rackPanel
}

type rackPanel struct {
	Name, Slug, Color, Stats string
	X, TitleY, StatsY        float64
	Racks                    []rackBox
}

type rackBox struct {
	X, Y, W, H           float64
	Name                 string // the rack's own name, for data-rack
	Label, CliqueLabel   string // fitted to the column
	Title                string // tooltip: rack and full clique
	LabelX, NameY, CliqY float64
	Trays                []trayBox
}

type trayBox struct {
	X, Y, W, H     float64
	Node, Group    string
	Fill, Title    string
	Label          string // the group's name on the tray, "" when free or too narrow
	LabelX, LabelY float64
	Dark           bool // dark text on a light fill
}

// Geometry of the rack chart, in SVG units.
const (
	rackPanelGap = 32.0
	rackGap      = 10.0
	rackPad      = 3.0
	trayH        = 16.0
	trayGap      = 3.0
	rackLabelH   = 30.0
	minTrayW     = 28.0
	maxTrayW     = 72.0
	trayCharW    = 6.0 // width of a 10px label character, roughly
	labelCharW   = 7.0 // width of a 12px legend character, roughly
)

// racks lays the maps out: at most two panels side by side, all with one
// geometry sized by the most racks and trays any map has, so that the
// panels compare tray for tray. rs gives each panel its scheduler's color
// by name (or by position when no result has that name).
func racks(maps []RackMap, rs []Result, width float64) rackChart {
	c := rackChart{ID: "chart-racks", Width: width}
	if len(maps) == 0 {
		return c
	}
	order, colors := groupColors(maps)

	// Legend: every group in its color, then free, flowing over lines.
	x, y := 0.0, 0.0
	entry := func(fill, label string) {
		label = truncate(label, 24)
		w := 12 + 6 + labelCharW*float64(utf8.RuneCountInString(label)) + 16
		if x > 0 && x+w > width {
			x, y = 0, y+18
		}
		c.Legend = append(c.Legend, swatch{X: x, Y: y + 2, Fill: fill, Label: label})
		x += w
	}
	for _, g := range order {
		entry(colors[g], g)
	}
	entry(freeColor, "free")
	top := y + 14 + 16

	perRow := min(len(maps), 2)
	pw := (width - rackPanelGap*float64(perRow-1)) / float64(perRow)
	most, tallest := 1, 1
	for _, m := range maps {
		most = max(most, len(m.Racks))
		for _, r := range m.Racks {
			tallest = max(tallest, len(r.Trays))
		}
	}
	trayW := min(max((pw-rackGap*float64(most-1))/float64(most)-2*rackPad, minTrayW), maxTrayW)
	rackW := trayW + 2*rackPad
	cols := max(1, int((pw+rackGap)/(rackW+rackGap)))
	rackH := 2*rackPad + float64(tallest)*(trayH+trayGap) - trayGap
	rowH := rackLabelH + rackH + 16
	// Characters a label of the column holds.
	fit := max(3, int((rackW-4)/trayCharW))

	named := make([]Result, len(maps))
	for i, m := range maps {
		named[i] = Result{Name: m.Scheduler}
	}
	slugs := slugs(named)
	panelH := 0.0
	for i, m := range maps {
		if i > 0 && i%perRow == 0 {
			top += panelH + 24
			panelH = 0
		}
		left := float64(i%perRow) * (pw + rackPanelGap)
		p := rackPanel{Name: m.Scheduler, Slug: slugs[i], Color: schedulerColor(m.Scheduler, i, rs), X: left, TitleY: top + 16, StatsY: top + 33}
		trays, held := 0, 0
		groups := map[string]bool{}
		for k, r := range m.Racks {
			rx := left + float64(k%cols)*(rackW+rackGap)
			ry := top + 44 + float64(k/cols)*rowH
			b := rackBox{
				X: rx, Y: ry + rackLabelH, W: rackW, H: 2*rackPad + float64(max(1, len(r.Trays)))*(trayH+trayGap) - trayGap,
				Name: r.Name, Label: truncate(r.Name, fit), CliqueLabel: cliqueLabel(r.Clique, fit),
				LabelX: rx + rackW/2, NameY: ry + 12, CliqY: ry + 25,
			}
			b.Title = r.Name
			if r.Clique != "" {
				b.Title += "\nNVLink clique " + r.Clique
			}
			for n, t := range r.Trays {
				trays++
				tb := trayBox{
					X: rx + rackPad, Y: b.Y + rackPad + float64(n)*(trayH+trayGap), W: trayW, H: trayH,
					Node: t.Node, Group: t.Group, Fill: freeColor,
				}
				where := fmt.Sprintf("%s, tray %d of %d", r.Name, n+1, len(r.Trays))
				if t.Group == "" {
					tb.Title = t.Node + "\n" + where + "\nfree"
				} else {
					held++
					groups[t.Group] = true
					tb.Fill = colors[t.Group]
					tb.Title = t.Node + "\n" + where + "\ngroup " + t.Group
					tb.Label = trayLabel(t.Group, trayW)
					tb.Dark = luminance(tb.Fill) > 0.55
				}
				tb.LabelX, tb.LabelY = tb.X+tb.W/2, tb.Y+trayH/2+3.5
				b.Trays = append(b.Trays, tb)
			}
			p.Racks = append(p.Racks, b)
		}
		p.Stats = rackStats(len(m.Racks), trays, held, len(groups))
		rows := max(1, (len(m.Racks)+cols-1)/cols)
		panelH = max(panelH, 44+float64(rows)*rowH-16)
		c.Panels = append(c.Panels, p)
	}
	c.Height = top + panelH + 8
	return c
}

// schedulerColor is the palette color of the result named name, or of
// position i when no result has that name.
func schedulerColor(name string, i int, rs []Result) string {
	for k, r := range rs {
		if r.Name == name {
			return color(k)
		}
	}
	return color(i)
}

func rackStats(racks, trays, held, groups int) string {
	if racks == 0 {
		return "no racks reported"
	}
	plural := func(n int, one, many string) string {
		if n == 1 {
			return count(n) + " " + one
		}
		return count(n) + " " + many
	}
	return fmt.Sprintf("%s · %s · %s held by %s · %s free",
		plural(racks, "rack", "racks"), plural(trays, "tray", "trays"), count(held), plural(groups, "group", "groups"), count(trays-held))
}

// trayLabel is the group's name as it fits on a tray trayW wide, or ""
// when not even three characters fit (the tooltip still names it).
func trayLabel(group string, trayW float64) string {
	n := int((trayW - 6) / trayCharW)
	if utf8.RuneCountInString(group) <= n {
		return group
	}
	if n < 3 {
		return ""
	}
	return truncate(group, n)
}

// luminance is a #rrggbb color's relative luminance, 0 (black) to 1.
func luminance(c string) float64 {
	var v [3]float64
	for i := range 3 {
		x, _ := strconv.ParseUint(c[1+2*i:3+2*i], 16, 8)
		v[i] = float64(x) / 255
	}
	return 0.2126*v[0] + 0.7152*v[1] + 0.0722*v[2]
}

// shortClique shortens NVIDIA's <ClusterUUID>.<CliqueId> for a label:
// the UUID's first block and the clique's number.
func shortClique(c string) string {
	uuid, id, ok := strings.Cut(c, ".")
	if !ok || len(uuid) <= 8 {
		return c
	}
	return uuid[:8] + "…." + id
}

// cliqueLabel is the short clique in at most n runes: the UUID's block
// cut further when it must, the clique's number kept, since racks of one
// cluster share the UUID and differ in the number.
func cliqueLabel(c string, n int) string {
	short := shortClique(c)
	if utf8.RuneCountInString(short) <= n {
		return short
	}
	uuid, id, ok := strings.Cut(c, ".")
	if k := n - 2 - utf8.RuneCountInString(id); ok && k >= 1 {
		return string([]rune(uuid)[:min(k, utf8.RuneCountInString(uuid))]) + "…." + id
	}
	return truncate(short, n)
}

// rackTables are the maps as text for the terminal summary: a row per
// rack, each tray marked with the group holding it ("·" free).
func rackTables(maps []RackMap) []Table {
	var out []Table
	for _, m := range maps {
		t := Table{Caption: "Racks at the end, " + m.Scheduler + ": each tray marked with the group holding it", Head: []string{"rack", "clique", "trays"}}
		for _, r := range m.Racks {
			marks := make([]string, len(r.Trays))
			for i, tr := range r.Trays {
				marks[i] = "·"
				if tr.Group != "" {
					marks[i] = tr.Group
				}
			}
			t.Rows = append(t.Rows, []string{r.Name, shortClique(r.Clique), strings.Join(marks, " ")})
		}
		out = append(out, t)
	}
	return out
}
