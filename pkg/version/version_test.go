package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	kube := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gputopo/gputopo", Version: "(devel)"},
		Deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.37.2"}, {Path: "k8s.io/kubernetes", Version: "v1.37.2"}}}
	replaced := &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/kubernetes", Version: "v1.37.2", Replace: &debug.Module{Path: "github.com/fork/kubernetes", Version: "v1.37.3-fork"}}}}
	local := &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/kubernetes", Version: "v1.37.2", Replace: &debug.Module{Path: "../kubernetes"}}}}
	installed := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gputopo/gputopo", Version: "v0.2.1"}}
	checkout := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gputopo/gputopo", Version: "v0.0.0-20261207081318-2d9a7b22a698"}}
	modified := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gputopo/gputopo", Version: "v0.0.0-20261207081318-2d9a7b22a698+dirty"}}
	afterTag := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gputopo/gputopo", Version: "v0.2.1-0.20261207081318-2d9a7b22a698"}}
	tests := []struct {
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"v0.2.0", kube, "gputopo-scheduler v0.2.0 (go1.26.8, kubernetes v1.37.2)"},
		{"dev", kube, "gputopo-scheduler dev (go1.26.8, kubernetes v1.37.2)"},
		{"v0.2.0", replaced, "gputopo-scheduler v0.2.0 (go1.26.8, kubernetes v1.37.3-fork)"},
		{"v0.2.0", local, "gputopo-scheduler v0.2.0 (go1.26.8, kubernetes v1.37.2)"},
		// go install github.com/gputopo/gputopo/cmd/...@v0.2.1: no -X, the module's version.
		{"dev", installed, "gputopo-scheduler v0.2.1 (go1.26.8)"},
		{"v0.2.0", installed, "gputopo-scheduler v0.2.0 (go1.26.8)"},
		{"dev", nil, "gputopo-scheduler dev (go1.26.8)"},
		// go build in a checkout (Go 1.24+ stamps a pseudo-version).
		{"dev", checkout, "gputopo-scheduler dev (commit 2d9a7b22a698) (go1.26.8)"},
		{"dev", modified, "gputopo-scheduler dev (commit 2d9a7b22a698, modified) (go1.26.8)"},
		{"dev", afterTag, "gputopo-scheduler v0.2.1-0.20261207081318-2d9a7b22a698 (go1.26.8)"},
	}
	for _, tc := range tests {
		if got := line("gputopo-scheduler", tc.stamped, "go1.26.8", tc.bi); got != tc.want {
			t.Errorf("line(%q, %+v) = %q, want %q", tc.stamped, tc.bi, got, tc.want)
		}
	}
	// This test binary does not link k8s.io/kubernetes.
	if got, want := Line("x"), "x "+Get()+" ("+runtime.Version()+")"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if raw := Raw("x"); !strings.HasPrefix(raw, Line("x")+"\n") || !strings.Contains(raw, "github.com/gputopo/gputopo") {
		t.Errorf("Raw = %q, want Line then the build info", raw)
	}
}

// The linker flag that `make build` and the Dockerfile pass reaches
// Version: a change of the variable's name or package breaks this test,
// not only the release's --version.
func TestLinkerStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	bin := filepath.Join(t.TempDir(), "stamped")
	build := exec.Command(gobin, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X github.com/gputopo/gputopo/pkg/version.Version=v9.8.7-test",
		"-o", bin, "./testdata/stamped")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "stamped v9.8.7-test ("+runtime.Version()+")"; got != want {
		t.Errorf("stamped binary printed %q, want %q", got, want)
	}
}

func TestReadReleaseFile(t *testing.T) {
	v, err := ReadReleaseFile("../..")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "v") {
		t.Errorf("VERSION = %q", v)
	}
	for _, tc := range []struct{ content, want string }{
		{"v0.2.0\n", "v0.2.0"},
		{"v1.0.0-rc.1", "v1.0.0-rc.1"},
		{"0.2.0\n", ""},
		{"v0.2\n", ""},
		{"latest\n", ""},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadReleaseFile(dir)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("ReadReleaseFile(%q) = %q, %v; want %q", tc.content, got, err, tc.want)
		}
	}
}
