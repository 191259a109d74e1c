package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The plugin is a static binary (make build: CGO_ENABLED=0) that people
// download and run anywhere: nothing it links may need cgo, such as
// go-nvml's NVML bindings.
func TestBuildsWithoutCgo(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, n, _ := strings.Cut(line, " ")
		if n != "0" && strings.HasPrefix(pkg, "github.com/") {
			t.Errorf("kubectl-gputopo links %s, which has cgo files", pkg)
		}
	}
}
