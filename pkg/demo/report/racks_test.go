package report

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// rackMaps is racks×trays per scheduler with groups of sizes taken in
// turn from sizes, placed tray after tray (the second scheduler from the
// last rack backwards, so the panels differ), the rest free.
func rackMaps(racks, trays int, sizes []int, schedulers ...string) []RackMap {
	var out []RackMap
	for s, name := range schedulers {
		m := RackMap{Scheduler: name}
		var holders []string
		for g, n := range sizes {
			for range n {
				holders = append(holders, fmt.Sprintf("job-%d", g+1))
			}
		}
		for r := range racks {
			rack := Rack{Name: fmt.Sprintf("rack-%c", 'a'+r), Clique: fmt.Sprintf("5fc03a36-dfbb-4802-b1c5-f9c877cb567%d.%d", s, r)}
			for t := range trays {
				k := r*trays + t
				if s == 1 {
					k = (racks-1-r)*trays + t
				}
				tray := Tray{Node: fmt.Sprintf("%s-%s-%d", slug(name), rack.Name, t)}
				if k < len(holders) {
					tray.Group = holders[k]
				}
				rack.Trays = append(rack.Trays, tray)
			}
			m.Racks = append(m.Racks, rack)
		}
		out = append(out, m)
	}
	return out
}

func TestRackLayout(t *testing.T) {
	twenty := make([]int, 20)
	for i := range twenty {
		twenty[i] = 1 + i%7
	}
	tests := []struct {
		name         string
		maps         []RackMap
		labels       bool // every held tray prints its group
		repeatColors bool
	}{
		{"nvl72 demo", rackMaps(2, 18, []int{14, 9, 4, 2}, "gputopo", "in-tree (first-fit)"), true, false},
		{"8 racks, 20 groups", rackMaps(8, 18, twenty, "gputopo", "in-tree (first-fit)"), true, true},
		{"3 schedulers, one rack", rackMaps(1, 18, []int{5}, "a", "b", "c"), true, false},
		{"30 racks wrap", rackMaps(30, 4, []int{3, 50}, "a", "b"), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := racks(tc.maps, nil, fullWidth)
			if len(c.Panels) != len(tc.maps) {
				t.Fatalf("%d panels, want %d", len(c.Panels), len(tc.maps))
			}
			colorOf := map[string]string{}
			colorsUsed := map[string]bool{}
			var frames [][4]float64
			for i, p := range c.Panels {
				m := tc.maps[i]
				var drawn []string
				for k, b := range p.Racks {
					if b.X < 0 || b.X+b.W > c.Width+1e-9 || b.Y < 0 || b.Y+b.H > c.Height {
						t.Fatalf("%s: rack %d at (%v,%v %vx%v) leaves the %vx%v chart", p.Name, k, b.X, b.Y, b.W, b.H, c.Width, c.Height)
					}
					if b.NameY < b.Y-rackLabelH || b.CliqY >= b.Y {
						t.Errorf("%s: rack %d's labels are not above its trays", p.Name, k)
					}
					for _, f := range frames {
						if b.X < f[0]+f[2] && f[0] < b.X+b.W && b.Y-rackLabelH < f[1]+f[3] && f[1]-rackLabelH < b.Y+b.H {
							t.Fatalf("%s: rack %d overlaps another rack or its labels", p.Name, k)
						}
					}
					frames = append(frames, [4]float64{b.X, b.Y, b.W, b.H})
					if len(b.Trays) != len(m.Racks[k].Trays) {
						t.Fatalf("%s: rack %d draws %d trays, want %d", p.Name, k, len(b.Trays), len(m.Racks[k].Trays))
					}
					for n, tr := range b.Trays {
						want := m.Racks[k].Trays[n]
						if tr.Node != want.Node || tr.Group != want.Group {
							t.Errorf("%s: rack %d tray %d is %s/%s, want %s/%s", p.Name, k, n, tr.Node, tr.Group, want.Node, want.Group)
						}
						drawn = append(drawn, tr.Node)
						if tr.X < b.X || tr.X+tr.W > b.X+b.W || tr.Y < b.Y || tr.Y+tr.H > b.Y+b.H {
							t.Errorf("%s: tray %s leaves its rack", p.Name, tr.Node)
						}
						if n > 0 && tr.Y < b.Trays[n-1].Y+b.Trays[n-1].H {
							t.Errorf("%s: tray %s overlaps the one above", p.Name, tr.Node)
						}
						if !strings.Contains(tr.Title, tr.Node) || !strings.Contains(tr.Title, fmt.Sprintf("tray %d of %d", n+1, len(b.Trays))) {
							t.Errorf("tooltip %q lacks the node or the tray's place", tr.Title)
						}
						if tr.Group == "" {
							if tr.Fill != freeColor || tr.Label != "" || !strings.HasSuffix(tr.Title, "\nfree") {
								t.Errorf("%s: free tray %s filled %s, label %q, tooltip %q", p.Name, tr.Node, tr.Fill, tr.Label, tr.Title)
							}
							continue
						}
						if !strings.HasSuffix(tr.Title, "\ngroup "+tr.Group) {
							t.Errorf("tooltip %q does not name the group %s", tr.Title, tr.Group)
						}
						if tc.labels && tr.Label != tr.Group {
							t.Errorf("%s: tray %s labelled %q, want %q", p.Name, tr.Node, tr.Label, tr.Group)
						}
						if prev, ok := colorOf[tr.Group]; ok && prev != tr.Fill {
							t.Errorf("group %s is %s in one place and %s in another", tr.Group, prev, tr.Fill)
						}
						colorOf[tr.Group] = tr.Fill
						colorsUsed[tr.Fill] = true
						if tr.Fill == freeColor || slices.Contains(palette, tr.Fill) {
							t.Errorf("group %s has %s, the free or a scheduler's color", tr.Group, tr.Fill)
						}
					}
				}
				// Every tray once.
				var want []string
				for _, r := range m.Racks {
					for _, tr := range r.Trays {
						want = append(want, tr.Node)
					}
				}
				if !slices.Equal(drawn, want) {
					t.Errorf("%s: drew trays %v, want %v", p.Name, drawn, want)
				}
				// Panels side by side, two to a row.
				if i%2 == 1 && p.X <= c.Panels[i-1].X {
					t.Errorf("panel %d is not right of panel %d", i, i-1)
				}
			}
			if repeated := len(colorsUsed) < len(colorOf); repeated != tc.repeatColors {
				t.Errorf("%d groups in %d colors; want colors repeated: %v", len(colorOf), len(colorsUsed), tc.repeatColors)
			}
			// The legend: every group in its color, then free.
			if len(c.Legend) != len(colorOf)+1 || c.Legend[len(c.Legend)-1].Fill != freeColor {
				t.Fatalf("legend has %d entries, want %d groups and free last", len(c.Legend), len(colorOf))
			}
			for _, e := range c.Legend[:len(c.Legend)-1] {
				if colorOf[e.Label] != e.Fill {
					t.Errorf("legend shows %s in %s, the trays in %s", e.Label, e.Fill, colorOf[e.Label])
				}
				if e.X < 0 || e.X > c.Width || e.Y+12 > c.Panels[0].TitleY-14 {
					t.Errorf("legend entry %s at (%v,%v) is outside its band", e.Label, e.X, e.Y)
				}
			}
		})
	}
}

func TestGroupColors(t *testing.T) {
	maps := []RackMap{
		{Scheduler: "a", Racks: []Rack{{Trays: []Tray{{Group: "job-10"}, {Group: "job-2"}, {}}}}},
		{Scheduler: "b", Racks: []Rack{{Trays: []Tray{{Group: "job-1"}, {Group: "job-2"}}}}},
	}
	order, colors := groupColors(maps)
	if strings.Join(order, ",") != "job-1,job-2,job-10" {
		t.Errorf("group order %v, want job-1,job-2,job-10", order)
	}
	for i, g := range order {
		if colors[g] != groupPalette[i] {
			t.Errorf("%s is %s, want %s", g, colors[g], groupPalette[i])
		}
	}
	// The palette: distinct colors, none a scheduler's or the free one.
	seen := map[string]bool{freeColor: true}
	for _, c := range palette {
		seen[c] = true
	}
	for _, c := range groupPalette {
		if seen[c] {
			t.Errorf("group color %s repeats a scheduler's, the free or another group's color", c)
		}
		seen[c] = true
	}
	for _, tc := range []struct{ a, b string }{{"a", "b"}, {"job-2", "job-10"}, {"x9", "x10"}, {"a", "ab"}, {"job-02", "job-3"}} {
		if naturalCompare(tc.a, tc.b) >= 0 || naturalCompare(tc.b, tc.a) <= 0 {
			t.Errorf("naturalCompare does not put %q before %q", tc.a, tc.b)
		}
	}
	if naturalCompare("job-1", "job-1") != 0 {
		t.Error("naturalCompare of equal names is not 0")
	}
}

func TestCliqueLabel(t *testing.T) {
	const c = "5fc03a36-dfbb-4802-b1c5-f9c877cb5670.12"
	for n, want := range map[int]string{20: "5fc03a36….12", 12: "5fc03a36….12", 9: "5fc03….12", 5: "5….12", 4: "5fc…"} {
		if got := cliqueLabel(c, n); got != want {
			t.Errorf("cliqueLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestShortClique(t *testing.T) {
	for in, want := range map[string]string{
		"5fc03a36-dfbb-4802-b1c5-f9c877cb5670.1": "5fc03a36….1",
		"short.3":                                "short.3",
		"no-dot-at-all-here":                     "no-dot-at-all-here",
		"":                                       "",
	} {
		if got := shortClique(in); got != want {
			t.Errorf("shortClique(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRacksHTML: the section draws every tray once per panel in its
// group's color, free trays gray, with a tooltip each; the SVG is XML.
func TestRacksHTML(t *testing.T) {
	r := sampleReport()
	r.Racks = rackMaps(2, 18, []int{14, 9, 6, 4, 2}, r.Schedulers[0].Name, r.Schedulers[1].Name)
	page, doc := render(t, r)
	if n := checkSVGsAreXML(t, page); n != 5 {
		t.Errorf("%d inline SVGs, want 5 (whole run, zoom, occupancy, link classes, racks)", n)
	}
	if strings.Contains(page, "ZgotmplZ") {
		t.Error("html/template rejected a value (ZgotmplZ in the page)")
	}
	if byID(doc, "racks") == nil || !strings.Contains(text(byID(doc, "racks")), "Racks and trays") {
		t.Fatal("no section Racks and trays")
	}
	svg := byID(doc, "chart-racks")
	if svg == nil || svg.Data != "svg" {
		t.Fatal("no <svg id=chart-racks>")
	}
	fillOf := map[string]string{}
	for _, slug := range []string{"gputopo", "in-tree-first-fit"} {
		var panel *html.Node
		walk(svg, func(e *html.Node) {
			if e.Data == "g" && attr(e, "data-scheduler") == slug {
				panel = e
			}
		})
		if panel == nil {
			t.Fatalf("no panel for %s", slug)
		}
		nodes := map[string]int{}
		free, held := 0, 0
		walk(panel, func(e *html.Node) {
			if attr(e, "class") != "tray" {
				return
			}
			nodes[attr(e, "data-node")]++
			g, fill := attr(e, "data-group"), attr(e, "fill")
			tip := ""
			if e.Parent.FirstChild.Data == "title" {
				tip = text(e.Parent.FirstChild)
			}
			if !strings.HasPrefix(tip, attr(e, "data-node")+"\n") {
				t.Errorf("tray %s has tooltip %q", attr(e, "data-node"), tip)
			}
			if g == "" {
				free++
				if fill != freeColor {
					t.Errorf("free tray %s is %s", attr(e, "data-node"), fill)
				}
				return
			}
			held++
			if prev, ok := fillOf[g]; ok && prev != fill {
				t.Errorf("group %s is %s and %s", g, prev, fill)
			}
			fillOf[g] = fill
		})
		if len(nodes) != 36 || free != 1 || held != 35 {
			t.Errorf("%s: %d distinct trays (%d held, %d free), want 36 (35, 1)", slug, len(nodes), held, free)
		}
		for n, k := range nodes {
			if k != 1 {
				t.Errorf("%s: tray %s drawn %d times", slug, n, k)
			}
		}
		found := ""
		walk(panel, func(e *html.Node) {
			if attr(e, "data-figure") == "racks-"+slug {
				found = text(e)
			}
		})
		if found != "2 racks · 36 trays · 35 held by 5 groups · 1 free" {
			t.Errorf("%s: stats %q", slug, found)
		}
	}
	if len(fillOf) != 5 {
		t.Errorf("%d groups colored, want 5", len(fillOf))
	}
	// Rack labels: the name and the short clique, the full one on hover.
	var labels []string
	walk(svg, func(e *html.Node) {
		if attr(e, "class") == "rack-label" {
			labels = append(labels, strings.ReplaceAll(text(e), "\n", "|"))
		}
	})
	if len(labels) != 4 || labels[0] != "rack-a|NVLink clique 5fc03a36-dfbb-4802-b1c5-f9c877cb5670.0rack-a5fc03a36….0" {
		t.Errorf("rack labels %q", labels)
	}

	// Without rack maps there is no section.
	_, doc = render(t, sampleReport())
	if byID(doc, "racks") != nil || byID(doc, "chart-racks") != nil {
		t.Error("a report without rack maps has a racks section")
	}
}

func TestRacksEscape(t *testing.T) {
	const (
		sched = `s<b>&"'`
		group = `</title><script>alert(1)</script>`
		rack  = `<img src=x onerror=alert(2)>`
		node  = `n"><svg onload=alert(3)>`
	)
	r := Report{Racks: []RackMap{{Scheduler: sched, Racks: []Rack{{Name: rack, Clique: `<c>.1`, Trays: []Tray{{Node: node, Group: group}, {Node: "free"}}}}}}}
	page, doc := render(t, r)
	if n := checkSVGsAreXML(t, page); n != 1 {
		t.Errorf("%d inline SVGs, want the racks chart alone", n)
	}
	for _, bad := range []string{"<script", "<img", "<b>", "<c>", "<svg onload"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	walk(doc, func(e *html.Node) {
		switch e.Data {
		case "script", "img", "b":
			t.Errorf("a report string became a <%s> element", e.Data)
		}
	})
	var groups, nodes []string
	walk(doc, func(e *html.Node) {
		if attr(e, "class") == "tray" {
			groups = append(groups, attr(e, "data-group"))
			nodes = append(nodes, attr(e, "data-node"))
		}
	})
	if !slices.Equal(groups, []string{group, ""}) || !slices.Equal(nodes, []string{node, "free"}) {
		t.Errorf("trays read back as groups %q nodes %q", groups, nodes)
	}
	texts := map[string]bool{}
	walk(doc, func(e *html.Node) { texts[strings.TrimSpace(text(e))] = true })
	for _, want := range []string{sched, "<c>.1"} {
		if !texts[want] {
			t.Errorf("no element reads %q", want)
		}
	}
}

func TestRackTablesInSummary(t *testing.T) {
	r := Report{Title: "t", Racks: []RackMap{{Scheduler: "gputopo", Racks: []Rack{
		{Name: "rack-a", Clique: "5fc03a36-dfbb-4802-b1c5-f9c877cb5670.1", Trays: []Tray{{Node: "n0", Group: "a"}, {Node: "n1"}, {Node: "n2", Group: "b"}}},
	}}}}
	var b strings.Builder
	if err := WriteSummary(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `t


Racks at the end, gputopo: each tray marked with the group holding it
  rack     clique        trays
  rack-a   5fc03a36….1   a · b
`
	if b.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
}
