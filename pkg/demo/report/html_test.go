package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// render writes r as HTML and parses it back the way a browser would.
func render(t *testing.T, r Report) (string, *html.Node) {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), doc
}

var claimsTitle = regexp.MustCompile(`: ([\d,]+) claims on `)

var svgFragment = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// checkSVGsAreXML decodes every inline <svg> as strict XML: unbalanced or
// unquoted markup, or a raw & or < from a name, fails here.
func checkSVGsAreXML(t *testing.T, page string) int {
	t.Helper()
	frags := svgFragment.FindAllString(page, -1)
	for _, f := range frags {
		d := xml.NewDecoder(strings.NewReader(f))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("SVG is not well-formed XML: %v\n%.300s", err, f)
				break
			}
		}
	}
	return len(frags)
}

func TestWriteHTMLStructure(t *testing.T) {
	page, doc := render(t, sampleReport())
	if n := checkSVGsAreXML(t, page); n != 4 {
		t.Errorf("%d inline SVGs, want 4 (whole run, zoom, occupancy, link classes)", n)
	}
	// Self-contained: nothing fetched, nothing run.
	for _, bad := range []string{"<script", "<link", "src=", "@import", "url(", "http://", "https://"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("page contains %q; it must be self-contained", bad)
		}
	}
	// html/template writes ZgotmplZ where it refused a value as unsafe in
	// its context (a color in CSS, say): that value is missing.
	if strings.Contains(page, "ZgotmplZ") {
		t.Error("html/template rejected a value (ZgotmplZ in the page)")
	}
	for _, id := range []string{"chart-unallocated", "chart-unallocated-zoom", "chart-occupancy", "chart-linkclass"} {
		if n := byID(doc, id); n == nil || n.Data != "svg" {
			t.Errorf("no <svg id=%q>", id)
		}
	}
	figures := map[string]string{
		"unallocated-gputopo":               "5.12%",
		"unallocated-in-tree-first-fit":     "8.90%",
		"placed-gputopo":                    "9,812",
		"placed-in-tree-first-fit":          "9,650",
		"pending-in-tree-first-fit":         "282",
		"pods-per-second-gputopo":           "797.7",
		"pods-per-second-in-tree-first-fit": "684.4",
		"published-openb-bestfit-published": "7.14%",
		"occupancy-gputopo":                 "29 GPUs · 16 full · 6 partly used · 7 free · 69.66% of GPU capacity in use",
	}
	found := map[string]string{}
	walk(doc, func(e *html.Node) {
		if k := attr(e, "data-figure"); k != "" {
			found[k] = text(e)
		}
	})
	for k, want := range figures {
		if found[k] != want {
			t.Errorf("data-figure=%q = %q, want %q", k, found[k], want)
		}
	}
	if !strings.Contains(found["lead"], "3.78 points less than in-tree (first-fit) at 8.90%") {
		t.Errorf("lead = %q", found["lead"])
	}

	// Occupancy: one square per GPU per panel, in the scheduler's color
	// when full and the free color when idle.
	for i, slug := range []string{"gputopo", "in-tree-first-fit"} {
		fills := map[string]int{}
		n := 0
		walk(byID(doc, "chart-occupancy"), func(e *html.Node) {
			if e.Data == "g" && attr(e, "data-scheduler") == slug {
				walk(e, func(c *html.Node) {
					if attr(c, "class") == "gpu" {
						n++
						fills[attr(c, "fill")]++
					}
				})
			}
		})
		if n != 29 || fills[palette[i]] != 16 || fills[freeColor] != 7 {
			t.Errorf("%s: %d GPU squares, %d full-colored, %d free; want 29, 16, 7", slug, n, fills[palette[i]], fills[freeColor])
		}
	}

	// Link classes: one bar per class and scheduler, heights proportional
	// to the counts.
	var perClaim []float64
	walk(byID(doc, "chart-linkclass"), func(e *html.Node) {
		if attr(e, "class") == "bar" {
			h, _ := strconv.ParseFloat(attr(e, "height"), 64)
			m := claimsTitle.FindStringSubmatch(text(e))
			if m == nil {
				t.Fatalf("bar title %q", text(e))
			}
			claims, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
			perClaim = append(perClaim, h/float64(claims))
		}
	})
	if len(perClaim) != 6 {
		t.Fatalf("%d bars, want 6", len(perClaim))
	}
	for _, v := range perClaim {
		if math.Abs(v-perClaim[0]) > 0.02*perClaim[0] {
			t.Errorf("bar heights per claim %v are not proportional", perClaim)
			break
		}
	}

	// Pending: one row per reason, most pods first.
	var reasons []string
	walk(doc, func(e *html.Node) {
		if e.Data == "table" && attr(e, "data-table") == "pending" {
			walk(e, func(tr *html.Node) {
				if tr.Data == "tr" && tr.Parent.Data == "tbody" {
					reasons = append(reasons, text(tr.FirstChild))
				}
			})
		}
	})
	if strings.Join(reasons, "|") != "insufficient GPU|gpu_spec <T4>" {
		t.Errorf("pending reasons %q", reasons)
	}
}

func TestWriteHTMLEscapes(t *testing.T) {
	const (
		name   = `a<b>&"c'`
		node   = `<img src=x onerror=alert(1)>`
		reason = `</td><script>alert(2)</script>`
		class  = `nv<link>`
	)
	r := Report{
		Title:    `<script>alert("t")</script>`,
		Scenario: "x & y",
		Schedulers: []Result{{
			Name: name, UnallocatedGPUPercent: 1,
			Curve:          []Point{{0, 100}, {120, 1}},
			LinkClasses:    map[string]int{class: 2},
			LinkClassOrder: []string{class},
			Nodes:          []NodeUse{{Name: node, Shape: "<8x>", Domains: []DomainUse{{Name: "<d>", GPUs: []float64{1, 0}}}}},
			Pending:        map[string]int{reason: 1},
			Extra:          []Figure{{Label: "<extra>", Value: 1, Unit: "<u>"}},
		}},
		Published: []Figure{{Label: "<pub>", Value: 3, Unit: "%"}},
		Notes:     []string{`<a href="javascript:x">note</a>`},
	}
	page, doc := render(t, r)
	checkSVGsAreXML(t, page)
	for _, bad := range []string{"<script", "<img", "<a ", "<b>", "<link", "<d>", "<pub>", "<extra>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	walk(doc, func(e *html.Node) {
		switch e.Data {
		case "script", "img", "a", "link": // the page's own <b>s carry figures
			t.Errorf("a report string became a <%s> element", e.Data)
		}
		if s := attr(e, "data-scheduler"); s != "" && !regexp.MustCompile(`^[a-z0-9-]+$`).MatchString(s) {
			t.Errorf("data-scheduler %q is not a slug", s)
		}
	})
	// The strings survive as text, exactly.
	texts := map[string]bool{}
	walk(doc, func(e *html.Node) { texts[strings.TrimSpace(text(e))] = true })
	for _, want := range []string{name, reason, class, "<pub>", "<extra>", `<a href="javascript:x">note</a>`} {
		if !texts[want] {
			t.Errorf("no element reads %q", want)
		}
	}
	if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt; (&lt;8x&gt;)") {
		t.Error("node tooltip is not the escaped node name and shape")
	}
}

// plotBox reads the data-plot attribute: the plot area the curves must
// stay in.
func plotBox(t *testing.T, svg *html.Node) [4]float64 {
	t.Helper()
	var b [4]float64
	f := strings.Fields(attr(svg, "data-plot"))
	if len(f) != 4 {
		t.Fatalf("#%s: data-plot %q", attr(svg, "id"), attr(svg, "data-plot"))
	}
	for i := range b {
		b[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return b
}

var pathCoords = regexp.MustCompile(`[ML](-?[\d.]+) (-?[\d.]+)`)

func TestCurvesStayInsideAxes(t *testing.T) {
	wild := sampleReport()
	// Long segments across the left edge of both charts (0% and the zoom's
	// 80%) and the zoom's top, a NaN and an infinity.
	wild.Schedulers[1].Curve = []Point{{-50, 100}, {10, 90}, {20, 80}, {120, 3}, {math.NaN(), 5}, {125, math.Inf(1)}, {130, 2}}
	tests := []struct {
		name string
		r    Report
	}{
		{"sample", sampleReport()},
		{"wild values", wild},
		{"short run without zoom", Report{Schedulers: []Result{{Name: "s", Curve: []Point{{0, 100}, {40, 60}}, UnallocatedGPUPercent: math.NaN()}},
			Published: []Figure{{Label: "ref", Value: 5, Unit: "%"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page, doc := render(t, tc.r)
			checkSVGsAreXML(t, page)
			charts := 0
			walk(doc, func(svg *html.Node) {
				if attr(svg, "data-chart") != "unallocated" {
					return
				}
				charts++
				box := plotBox(t, svg)
				curves := 0
				walk(svg, func(e *html.Node) {
					if e.Data == "path" && attr(e, "class") == "curve" {
						curves++
						m := pathCoords.FindAllStringSubmatch(attr(e, "d"), -1)
						if len(m) < 2 {
							t.Errorf("#%s: curve %q has %d points", attr(svg, "id"), attr(e, "data-scheduler"), len(m))
						}
						for _, p := range m {
							x, _ := strconv.ParseFloat(p[1], 64)
							y, _ := strconv.ParseFloat(p[2], 64)
							if x < box[0]-0.05 || x > box[2]+0.05 || y < box[1]-0.05 || y > box[3]+0.05 {
								t.Errorf("#%s: point (%v, %v) outside the plot %v", attr(svg, "id"), x, y, box)
							}
						}
					}
					if e.Data == "circle" {
						cx, _ := strconv.ParseFloat(attr(e, "cx"), 64)
						cy, _ := strconv.ParseFloat(attr(e, "cy"), 64)
						if cx < box[0] || cx > box[2] || cy < box[1] || cy > box[3] {
							t.Errorf("#%s: dot (%v, %v) outside the plot %v", attr(svg, "id"), cx, cy, box)
						}
					}
				})
				if curves != len(tc.r.Schedulers) {
					t.Errorf("#%s: %d curves, want %d", attr(svg, "id"), curves, len(tc.r.Schedulers))
				}
			})
			if charts == 0 {
				t.Error("no unallocated chart")
			}
		})
	}
}

func TestHTMLAtOpenbScale(t *testing.T) {
	r := sampleReport()
	for i := range r.Schedulers {
		r.Schedulers[i].Nodes = openbNodes(uint64(i))
	}
	page, doc := render(t, r)
	// 2 x 6,212 squares: the page must stay small enough to open at once.
	if len(page) > 2_500_000 {
		t.Errorf("page is %d bytes at openb scale, want <= 2.5 MB", len(page))
	}
	squares := 0
	walk(byID(doc, "chart-occupancy"), func(e *html.Node) {
		if attr(e, "class") == "gpu" {
			squares++
		}
	})
	if squares != 2*6212 {
		t.Errorf("%d GPU squares, want %d", squares, 2*6212)
	}
}

// TestWriteHTMLTableOnly: a report of tables alone (the openb table of
// every trace) shows them, with no empty charts of schedulers it has not.
func TestWriteHTMLTableOnly(t *testing.T) {
	r := Report{Title: "openb table", Notes: []string{"n"}, Tables: []Table{{
		Caption: "unallocated GPU", Head: []string{"trace", "gputopo", "FGD (published)"},
		Rows: [][]string{{"default", "4.99 ± 0.17", "4.77"}, {"<gpuspec33>", "12.31 ± 1.19", "12.16"}},
	}}}
	page, doc := render(t, r)
	if n := checkSVGsAreXML(t, page); n != 0 {
		t.Errorf("%d inline SVGs, want none without schedulers", n)
	}
	var cells []string
	walk(doc, func(n *html.Node) {
		if n.Data == "td" && n.Parent != nil && n.Parent.Parent != nil && n.Parent.Parent.Parent != nil && attr(n.Parent.Parent.Parent, "data-table") == "extra" {
			cells = append(cells, text(n))
		}
	})
	want := []string{"default", "4.99 ± 0.17", "4.77", "<gpuspec33>", "12.31 ± 1.19", "12.16"}
	if strings.Join(cells, "|") != strings.Join(want, "|") {
		t.Errorf("table cells %q, want %q", cells, want)
	}
	if byID(doc, "unallocated") != nil || byID(doc, "occupancy") != nil {
		t.Error("charts of schedulers shown in a report without schedulers")
	}
}
