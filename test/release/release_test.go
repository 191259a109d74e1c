// Package release checks how gputopo's release artifacts are built: the
// Makefile's stamped, reproducible binaries and the Dockerfile and `make
// image` commands around them. The images themselves need a container
// runtime and the base images' registries, which `make test` may not
// have; everything they are made of is checked here.
package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

func releaseVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

func runIn(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The same commit built twice gives the same bytes, and the binary says
// the release it was stamped with.
func TestReleaseBinaryIsReproducibleAndStamped(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	var built [2][]byte
	for i := range built {
		dir := t.TempDir()
		runIn(t, root, "make", "build-kubectl-gputopo", "BIN_DIR="+dir)
		bin := filepath.Join(dir, "kubectl-gputopo")
		raw, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		built[i] = raw
		if out := runIn(t, dir, bin, "--version"); !strings.Contains(out, "kubectl-gputopo "+releaseVersion(t)) {
			t.Errorf("--version printed %q, want the release %s", out, releaseVersion(t))
		}
	}
	if !bytes.Equal(built[0], built[1]) {
		t.Errorf("two builds of one commit differ (%d and %d bytes)", len(built[0]), len(built[1]))
	}
}

// The binaries carry the Kubernetes release they are built on where
// kube-scheduler's own code reads its version (component-base, client-go):
// unstamped, kubernetes_build_info says v0.0.0-master and
// --version=vX.Y.Z is refused. -X names a variable silently, so each is
// checked to exist in the module the build uses.
func TestKubernetesVersionStamped(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	k8s := strings.TrimSpace(runIn(t, root, "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes"))
	fields := strings.Split(strings.TrimPrefix(k8s, "v"), ".")
	if len(fields) < 2 {
		t.Fatalf("k8s.io/kubernetes version %q", k8s)
	}
	build := runIn(t, root, "make", "-n", "build-gputopo-scheduler")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for variable, value := range map[string]string{"gitVersion": k8s, "gitMajor": fields[0], "gitMinor": fields[1]} {
			want := "-X " + pkg + "." + variable + "=" + value
			if !regexp.MustCompile(regexp.QuoteMeta(want) + `['\s]`).MatchString(build) {
				t.Errorf("make build-gputopo-scheduler does not stamp %q:\n%s", want, build)
			}
		}
		module := strings.Join(strings.Split(pkg, "/")[:2], "/")
		dir := strings.TrimSpace(runIn(t, root, "go", "list", "-m", "-f", "{{.Dir}}", module))
		src, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(pkg, module+"/"), "base.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, variable := range []string{"gitVersion", "gitMajor", "gitMinor"} {
			if !regexp.MustCompile(`(?m)^\s+` + variable + `\s`).Match(src) {
				t.Errorf("%s has no variable %s to stamp", pkg, variable)
			}
		}
	}
}

// make image builds both targets of the Dockerfile with the release's
// tag, version and timestamp, with whichever container tool is named.
func TestMakeImageCommands(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out := runIn(t, root, "make", "-n", "image", "VERSION=v9.9.9", "SOURCE_DATE_EPOCH=1700000000", "CONTAINER_TOOL=podman", "REGISTRY=registry.example.com/gpu")
	for _, want := range []string{
		"podman build --target scheduler --build-arg VERSION=v9.9.9 --build-arg SOURCE_DATE_EPOCH=1700000000  -t registry.example.com/gpu/gputopo-scheduler:v9.9.9 .",
		"podman build --target nodeagent --build-arg VERSION=v9.9.9 --build-arg SOURCE_DATE_EPOCH=1700000000  -t registry.example.com/gpu/nodeagent:v9.9.9 .",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make -n image lacks\n  %s\nin\n%s", want, out)
		}
	}
	if out := runIn(t, root, "make", "-n", "image-scheduler"); !strings.Contains(out, ":"+releaseVersion(t)+" .") {
		t.Errorf("make image does not tag with VERSION %s by default:\n%s", releaseVersion(t), out)
	}
}

// The Dockerfile: a build stage that builds through the Makefile (the
// same flags as make build), and two final stages on distroless non-root
// bases that run as a non-root user and carry the version.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]string{} // name -> its lines
	args := map[string]string{}   // global ARG defaults
	var current string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch f := strings.Fields(line); {
		case len(f) == 0 || strings.HasPrefix(line, "#"):
		case f[0] == "FROM":
			if len(f) != 4 || f[2] != "AS" {
				t.Fatalf("FROM without a stage name: %q", line)
			}
			current = f[3]
			stages[current] = line + "\n"
		case current == "" && f[0] == "ARG":
			name, def, _ := strings.Cut(f[1], "=")
			args[name] = def
		case current != "":
			stages[current] += line + "\n"
		}
	}
	build := stages["build"]
	if !regexp.MustCompile(`make build-gputopo-scheduler build-gputopo-nodeagent VERSION="\$\{VERSION\}"`).MatchString(build) {
		t.Errorf("the build stage does not build through the Makefile with VERSION:\n%s", build)
	}
	for _, stage := range []string{"scheduler", "nodeagent"} {
		s, ok := stages[stage]
		if !ok {
			t.Fatalf("no stage %s", stage)
		}
		from := strings.Fields(s)[1]
		base := args[strings.Trim(from, "${}")]
		if !strings.Contains(base, "gcr.io/distroless/") || !strings.HasSuffix(base, ":nonroot") {
			t.Errorf("stage %s is based on %s (%s), want a distroless nonroot image", stage, from, base)
		}
		for _, want := range []string{"USER 65532:65532", `org.opencontainers.image.version="${VERSION}"`, "COPY --from=build /out/gputopo-" + stage} {
			if !strings.Contains(s, want) {
				t.Errorf("stage %s lacks %q:\n%s", stage, want, s)
			}
		}
	}
	// The scheduler is static: nothing but the binary beneath it.
	if base := args[strings.Trim(strings.Fields(stages["scheduler"])[1], "${}")]; !strings.Contains(base, "distroless/static") {
		t.Errorf("the scheduler's base %q is not distroless/static", base)
	}
}

// Every Makefile target that compiles what links go-nvml (go test, go
// run, go vet, golangci-lint, the node agent's build) checks for cgo
// first: without a C compiler the build otherwise fails with "undefined:
// Return" in go-nvml, which says nothing of the cause.
func TestMakeTargetsCheckCgo(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`^([a-z][a-z-]*):(.*)$`)
	var target, prereqs string
	for _, line := range strings.Split(string(raw), "\n") {
		if m := rule.FindStringSubmatch(line); m != nil {
			target, prereqs = m[1], m[2]
			continue
		}
		if !strings.HasPrefix(line, "\t") || target == "" || target == "cgo" {
			continue
		}
		compiles := strings.Contains(line, "$(GO) test") || strings.Contains(line, "$(GO) run") || strings.Contains(line, "$(GO) vet") ||
			strings.Contains(line, "$(LINT) run") || strings.Contains(line, "CGO_ENABLED=1")
		if compiles && !strings.Contains(" "+prereqs+" ", " cgo ") {
			t.Errorf("make %s compiles go-nvml without checking for cgo first (add cgo to its prerequisites)", target)
			target = ""
		}
	}
}
