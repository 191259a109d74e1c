package manifests

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/version"
)

// The release in VERSION is the tag of every gputopo image the manifests,
// the Makefile (make image) and the Helm chart name, and they name the
// same repositories: a release bumps VERSION and these follow.
func TestImagesCarryRelease(t *testing.T) {
	release, err := version.ReadReleaseFile("..")
	if err != nil {
		t.Fatal(err)
	}
	manifests := manifestImages(t, ".")
	repos := map[string]bool{}
	for file, refs := range manifests {
		for _, ref := range refs {
			repo, tag := splitImage(ref)
			repos[repo] = true
			if tag != release {
				t.Errorf("%s: image %s, want tag %s (VERSION)", file, ref, release)
			}
		}
	}
	made := makefileImages(t, "../Makefile", release)
	if got, want := slices.Sorted(maps.Keys(repos)), slices.Sorted(maps.Keys(made)); !slices.Equal(got, want) {
		t.Errorf("the manifests name the gputopo images %v, make image builds %v", got, want)
	}
	for repo, tag := range made {
		if tag != release {
			t.Errorf("Makefile: make image tags %s:%s, want %s (VERSION)", repo, tag, release)
		}
	}
	if _, err := os.Stat("../charts/gputopo/Chart.yaml"); err == nil {
		checkChartRelease(t, "../charts/gputopo", release, slices.Sorted(maps.Keys(made)))
	}
}

// checkChartRelease checks the Helm chart in dir against the release:
// Chart.yaml's appVersion is release (the templates default the images'
// tag to it, so it is the tag, v included), and values.yaml names exactly
// the image repositories repos, each with an empty tag (the appVersion)
// or release.
func checkChartRelease(t *testing.T, dir, release string, repos []string) {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(dir, "Chart.yaml"), &chart)
	if chart.AppVersion != release {
		t.Errorf("%s/Chart.yaml: appVersion %q, want %q (VERSION, the images' tag)", dir, chart.AppVersion, release)
	}
	var values any
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	found := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if repo, ok := v["repository"].(string); ok && strings.Contains(repo, "gputopo") {
				found[repo] = true
				if tag, _ := v["tag"].(string); tag != "" && tag != release {
					t.Errorf("%s/values.yaml %s: tag %q, want empty (appVersion) or %q", dir, path, tag, release)
				}
			}
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", values)
	if got := slices.Sorted(maps.Keys(found)); !slices.Equal(got, repos) {
		t.Errorf("%s/values.yaml names the gputopo images %v, make image builds %v", dir, got, repos)
	}
}

var imageRE = regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*["']?([^\s"'#]+)`)

// manifestImages returns the gputopo image references (those whose
// repository names gputopo) in the YAML files under root, by file; a
// kustomization's images: entry for one counts too.
func manifestImages(t *testing.T, root string) map[string][]string {
	t.Helper()
	refs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range imageRE.FindAllStringSubmatch(string(b), -1) {
			if repo, _ := splitImage(m[1]); strings.Contains(repo, "gputopo") {
				refs[path] = append(refs[path], m[1])
			}
		}
		if d.Name() == "kustomization.yaml" {
			var k struct {
				Images []struct{ Name, NewName, NewTag string } `json:"images"`
			}
			readYAML(t, path, &k)
			for _, i := range k.Images {
				if strings.Contains(i.Name+i.NewName, "gputopo") && i.NewTag != "" {
					refs[path] = append(refs[path], i.Name+":"+i.NewTag)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 {
		t.Fatalf("no gputopo image under %s", root)
	}
	return refs
}

var makeVarRE = regexp.MustCompile(`(?m)^([A-Z_]+)\s*(?:\?=|:=|=)\s*(.*?)\s*$`)

// makefileImages returns the repositories and tags of the Makefile's
// *_IMAGE variables (what make image tags), VERSION being release.
func makefileImages(t *testing.T, path, release string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range makeVarRE.FindAllStringSubmatch(string(b), -1) {
		if _, ok := vars[m[1]]; !ok {
			vars[m[1]] = m[2]
		}
	}
	if vars["VERSION"] != "$(shell cat VERSION)" {
		t.Errorf("Makefile: VERSION = %q, want it read from the VERSION file", vars["VERSION"])
	}
	vars["VERSION"] = release
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	var expand func(s string, depth int) string
	expand = func(s string, depth int) string {
		if depth > 10 {
			return s
		}
		return ref.ReplaceAllStringFunc(s, func(r string) string {
			return expand(vars[ref.FindStringSubmatch(r)[1]], depth+1)
		})
	}
	images := map[string]string{}
	for name, v := range vars {
		if !strings.HasSuffix(name, "_IMAGE") {
			continue
		}
		img := expand(v, 0)
		if strings.Contains(img, "$") {
			t.Errorf("Makefile: %s = %q does not expand", name, v)
			continue
		}
		repo, tag := splitImage(img)
		images[repo] = tag
	}
	if len(images) == 0 {
		t.Fatal("Makefile: no *_IMAGE variable")
	}
	return images
}

// splitImage splits repository[:tag][@digest] at the tag.
func splitImage(ref string) (repo, tag string) {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
