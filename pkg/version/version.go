// Package version is gputopo's release version, stamped into the binaries
// at link time, and the line their --version prints.
//
// The release is the repository's VERSION file; `make build` and the
// Dockerfile pass it to the linker:
//
//	go build -ldflags "-X github.com/gputopo/gputopo/pkg/version.Version=$(cat VERSION)" ./cmd/...
package version

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is gputopo's release ("v0.2.0"), set at link time with
// -X github.com/gputopo/gputopo/pkg/version.Version=...; "dev" in a plain
// go build or go run.
var Version = "dev"

// kubernetesModule is the module whose version names the kube-scheduler a
// binary is built on (cmd/scheduler links it; the node agent and the
// kubectl plugin do not).
const kubernetesModule = "k8s.io/kubernetes"

// Get returns Version or, when the linker did not stamp it, the main
// module's version recorded by `go install ...@v0.2.0`.
func Get() string {
	bi, _ := debug.ReadBuildInfo()
	return get(Version, bi)
}

// Line returns the one line --version prints:
//
//	gputopo-scheduler v0.2.0 (go1.26.8, kubernetes v1.37.2)
//
// the Kubernetes version being that of module k8s.io/kubernetes when the
// binary links it, and omitted otherwise.
func Line(program string) string {
	bi, _ := debug.ReadBuildInfo()
	return line(program, Version, runtime.Version(), bi)
}

// Raw returns Line followed by the binary's build information (what `go
// version -m` prints: module versions and build settings; -ldflags is not
// among them in a -trimpath build).
func Raw(program string) string {
	s := Line(program) + "\n"
	if bi, ok := debug.ReadBuildInfo(); ok {
		s += bi.String()
	}
	return s
}

func get(stamped string, bi *debug.BuildInfo) string {
	if stamped != "dev" && stamped != "" {
		return stamped
	}
	if bi == nil || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "dev"
	}
	if m := untaggedRE.FindStringSubmatch(bi.Main.Version); m != nil {
		return devBuild(m[1], m[2] != "")
	}
	return bi.Main.Version
}

// untaggedRE matches the pseudo-version Go stamps into a build from a
// checkout with no release tag behind it (go build since Go 1.24, or go
// install ...@commit): v0.0.0-<time>-<commit>, "+dirty" when modified.
// Printed as it is, it would read as older than every release.
var untaggedRE = regexp.MustCompile(`^v0\.0\.0-[0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)

func devBuild(commit string, modified bool) string {
	if modified {
		return "dev (commit " + commit + ", modified)"
	}
	return "dev (commit " + commit + ")"
}

func line(program, stamped, goVersion string, bi *debug.BuildInfo) string {
	parts := []string{goVersion}
	if k := moduleVersion(bi, kubernetesModule); k != "" {
		parts = append(parts, "kubernetes "+k)
	}
	return fmt.Sprintf("%s %s (%s)", program, get(stamped, bi), strings.Join(parts, ", "))
}

// moduleVersion is the version of module path in bi ("" when the binary
// does not link it), following a replace directive to a versioned module.
func moduleVersion(bi *debug.BuildInfo, path string) string {
	if bi == nil {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		if d.Replace != nil && d.Replace.Version != "" {
			return d.Replace.Version
		}
		return d.Version
	}
	return ""
}

// releaseRE is the form of a release in the VERSION file: a semantic
// version with a leading v, as image tags and Go module versions use.
var releaseRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// ReadReleaseFile returns the release in the VERSION file at the root of
// the repository checked out at repoRoot ("v0.2.0"): the one source of the
// version the Makefile stamps and tags the images with, and that the
// manifests and the Helm chart (appVersion) must name. Tests of the
// manifests and the chart call it.
func ReadReleaseFile(repoRoot string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if !releaseRE.MatchString(v) {
		return "", fmt.Errorf("VERSION: %q is not a release like v0.2.0", v)
	}
	return v, nil
}
