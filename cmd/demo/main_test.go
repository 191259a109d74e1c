package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README's first command, end to end: embedded control plane, both
// copies of the built-in fleet from mock node agents, the built-in
// workload through both schedulers, the summary and the report, which
// headless Chromium renders with its charts and figures.
func TestDefaultScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a control plane and runs the whole demo")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := run(ctx, []string{"--out", out, "--quiet"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("default scenario in %s", time.Since(start).Round(time.Second))
	summary, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gputopo", "in-tree (first-fit)", "tensor-parallel requests served", "DRA article requests served", "MIG requests served", "shared requests served", "nvidia.com/gpu requests served", "GPUs held, averaged over the steps"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	t.Logf("summary:\n%s", summary)
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="chart-occupancy"`, `id="chart-unallocated"`, `id="chart-linkclass"`, `data-figure="unallocated-gputopo"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %s", want)
		}
	}

	bin := ""
	for _, b := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("GPUTOPO_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("chromium not found: install Debian's chromium package")
		}
		t.Log("chromium not installed: the report was not opened in a browser")
		return
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer ccancel()
	dom, err := exec.CommandContext(cctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(),
		"--dump-dom", "file://"+filepath.Join(out, "report.html")).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	for _, want := range []string{`id="chart-occupancy"`, `id="chart-unallocated"`, `id="chart-linkclass"`, "<rect", "<path", "gputopo", "in-tree (first-fit)"} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("rendered report lacks %s", want)
		}
	}
}

// go run ./cmd/demo --scenario=nvl72: pod groups through both profiles
// with the pod-group gates; gputopo starts every job whole within one NVLink clique (the
// in-tree generator's choice of rack is random, so only its report is
// checked).
func TestNVL72Scenario(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a control plane and runs the whole demo")
	}
	// Its own process, as a person runs it: the pod-group gates are the
	// process's, and kube-scheduler reads some of them once per process,
	// so an earlier test's scheduler in this process would leave them off.
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if log, err := exec.CommandContext(ctx, bin, "--scenario=nvl72", "--out", out, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("demo --scenario=nvl72: %v\n%s", err, log)
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", summary)
	var started, inOne string
	for _, line := range strings.Split(string(summary), "\n") {
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "pod groups started whole") && len(fields) >= 7:
			started = strings.Join(fields[4:7], " ")
		case strings.HasPrefix(line, "started groups in one NVLink clique") && len(fields) >= 9:
			inOne = strings.Join(fields[6:9], " ")
		}
	}
	if started != "8 of 8" || inOne != "8 of 8" {
		t.Errorf("gputopo: %q groups started whole, %q in one clique; want 8 of 8 both", started, inOne)
	}
	for _, want := range []string{"Pod groups: started whole", "Racks at the end, gputopo", "Racks at the end, in-tree (first-fit)", "nvl72-a", "nvl72-b"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	// The report draws both schedulers' racks side by side, every tray
	// once; gputopo's end state holds every tray (d, e, f, g and h).
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<section id="racks">`, "Racks and trays", `id="chart-racks"`, `data-scheduler="gputopo"`, `data-scheduler="in-tree-first-fit"`, `data-rack="nvl72-a"`, `data-rack="nvl72-b"`, `data-group="h"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %s", want)
		}
	}
	if n := strings.Count(string(page), `class="tray"`); n != 2*36 {
		t.Errorf("report draws %d trays, want %d (36 per scheduler)", n, 2*36)
	}
	stats := regexp.MustCompile(`data-figure="racks-gputopo">([^<]*)<`).FindStringSubmatch(string(page))
	if stats == nil || stats[1] != "2 racks · 36 trays · 36 held by 5 groups · 0 free" {
		t.Errorf("gputopo's racks: %q, want 2 racks · 36 trays · 36 held by 5 groups · 0 free", stats)
	}
}

// Your own files (--cluster, --workload), with node names as long as the
// file allows: each node agent's sockets must still fit a Unix socket
// path, and the report reads GPUs unallocated at the workload's end.
func TestOwnFilesWithLongNodeNames(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a control plane")
	}
	dir := t.TempDir()
	cluster := filepath.Join(dir, "fleet.yaml")
	workload := filepath.Join(dir, "workload.yaml")
	name := strings.Repeat("a", 53) // the longest fleet.ParseCluster takes
	for path, body := range map[string]string{
		cluster:  "nodes:\n- {name: " + name + ", count: 1, shape: dgxh100}\n",
		workload: "steps: 2\ntemplates:\n  one: {class: gpu.nvidia.com, count: 1}\npods:\n- {name: p, template: one, count: 2, arrive: 0}\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "out")
	if err := run(ctx, []string{"--cluster=" + cluster, "--workload=" + workload, "--out", out, "--quiet"}); err != nil {
		t.Fatal(err)
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "unallocated GPU at the end (25.00% arrived)    75.00%"; !strings.Contains(string(summary), want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
	}
}
