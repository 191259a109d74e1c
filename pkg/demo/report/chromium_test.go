package report

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// chromium finds Debian's Chromium. Without it the browser tests skip,
// unless GPUTOPO_REQUIRE_CHROMIUM=1 (CI with the package) makes that fail.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "chromium not found: install Debian's chromium package (apt-get install -y chromium)"
	if os.Getenv("GPUTOPO_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// runChromium runs headless Chromium on a fresh profile with everything
// that would reach the network turned off, and returns its stdout.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestHTMLInChromium renders the sample report in a real browser: the DOM
// Chromium builds must hold the three charts with their drawn elements and
// the key figures, and a screenshot must show both schedulers' colors
// (the SVG was painted, not just parsed). GPUTOPO_REPORT_KEEP=dir keeps
// report.html and report.png there for a person to look at.
func TestHTMLInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	if keep := os.Getenv("GPUTOPO_REPORT_KEEP"); keep != "" {
		dir = keep
	}
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + page

	doc, err := html.Parse(bytes.NewReader(runChromium(t, bin, "--dump-dom", url)))
	if err != nil {
		t.Fatal(err)
	}
	charts := []struct {
		id    string
		drawn []string // element names that must be drawn inside
		min   int
	}{
		{"chart-unallocated", []string{"path"}, 2},
		{"chart-unallocated-zoom", []string{"path"}, 2},
		{"chart-occupancy", []string{"rect"}, 2 * 25},
		{"chart-linkclass", []string{"rect"}, 2 * 3},
	}
	for _, c := range charts {
		svg := byID(doc, c.id)
		if svg == nil || svg.Data != "svg" {
			t.Errorf("no <svg id=%q> in Chromium's DOM", c.id)
			continue
		}
		n := 0
		walk(svg, func(e *html.Node) {
			for _, d := range c.drawn {
				if e.Data == d && (d != "path" || attr(e, "d") != "") {
					n++
				}
			}
		})
		if n < c.min {
			t.Errorf("#%s has %d drawn %v elements, want >= %d", c.id, n, c.drawn, c.min)
		}
	}
	figures := map[string]string{
		"unallocated-gputopo":           "5.12%",
		"unallocated-in-tree-first-fit": "8.90%",
		"placed-gputopo":                "9,812",
		"pods-per-second-gputopo":       "797.7",
		"published-openb-fgd-published": "4.77%",
	}
	found := map[string]string{}
	walk(doc, func(e *html.Node) {
		if k := attr(e, "data-figure"); k != "" {
			found[k] = strings.TrimSpace(text(e))
		}
	})
	for k, want := range figures {
		if found[k] != want {
			t.Errorf("data-figure=%q shows %q, want %q", k, found[k], want)
		}
	}

	shot := filepath.Join(dir, "report.png")
	runChromium(t, bin, "--hide-scrollbars", "--window-size=1400,2000", "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"gputopo", "in-tree (first-fit)"} {
		// The cards' color stripes and dots make under 2,500 pixels; the
		// charts' bars, curves and full GPU squares make over 15,000.
		if n := pixelsNear(img, palette[i]); n < 8000 {
			t.Errorf("screenshot has %d pixels of %s's color %s, want >= 8000: the charts were not painted", n, name, palette[i])
		}
	}
}

// pixelsNear counts pixels within a small distance of a #rrggbb color
// (antialiasing blends edges, solid fills match exactly).
func pixelsNear(img image.Image, hex string) int {
	want := [3]int{}
	for i := range 3 {
		var v int
		for _, c := range hex[1+2*i : 3+2*i] {
			v = v*16 + strings.IndexRune("0123456789abcdef", c)
		}
		want[i] = v
	}
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if abs(int(r>>8)-want[0]) <= 6 && abs(int(g>>8)-want[1]) <= 6 && abs(int(b>>8)-want[2]) <= 6 {
				n++
			}
		}
	}
	return n
}

func abs(v int) int { return max(v, -v) }
