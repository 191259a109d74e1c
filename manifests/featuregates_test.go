package manifests

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	_ "k8s.io/kubernetes/pkg/features" // registers Kubernetes' gates and their dependencies on utilfeature's gate
	"sigs.k8s.io/yaml"
)

// Every --feature-gates flag and featureGates map that the docs, the chart
// and the manifests tell users to set is accepted by Kubernetes'
// components as this module's k8s.io/kubernetes defines the gates: known
// names, none locked, and every gate an enabled one depends on enabled
// too. A component refuses a gate whose dependencies are off when it
// starts (DRAWorkloadResourceClaims needs GenericWorkload), so a wrong
// string in NOTES.txt is a kubelet or API server that does not start.
// The chart's templated flag is not read here: with podGroups it renders
// manifests/pod-groups' flag, which is (charts/kustomize_test.go keeps
// the two equal).
func TestFeatureGatesAreAccepted(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../*.md", "../docs/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, root := range []string{"../charts/gputopo", "."} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			// Go files are code, this test's among them, not instructions.
			if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".go") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	flagged := map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, m := range featureGatesFlagRE.FindAllStringSubmatch(text, -1) {
			if m[1] != "" {
				continue // a template's value, rendered from values
			}
			flagged[file] = true
			if m[2] == "" {
				t.Errorf("%s: %s without gates", file, m[0])
			} else if err := utilfeature.DefaultMutableFeatureGate.DeepCopy().Set(m[2]); err != nil {
				t.Errorf("%s: %s: %v", file, m[0], err)
			}
		}
		var docs []string // YAML that may hold featureGates maps
		switch {
		case strings.HasSuffix(file, ".md"):
			for _, b := range yamlBlockRE.FindAllStringSubmatch(text, -1) {
				docs = append(docs, b[1])
			}
		case strings.HasSuffix(file, ".yaml") && filepath.Base(filepath.Dir(file)) != "templates":
			docs = []string{text}
		}
		for _, gates := range featureGateMaps(docs) {
			if err := setFromYAML(gates); err != nil {
				t.Errorf("%s: featureGates %v: %v", file, gates, err)
			}
		}
	}
	// The extraction still finds what it is there for.
	for _, want := range []string{"../charts/gputopo/templates/NOTES.txt", "../docs/scheduler.md", "pod-groups/feature-gates.yaml", "pod-groups/kustomization.yaml"} {
		if !flagged[filepath.Clean(want)] {
			t.Errorf("no --feature-gates=... found in %s", want)
		}
	}
}

// featureGatesFlagRE matches --feature-gates=VALUE; a value that starts
// with {{ is a template's (group 1).
var featureGatesFlagRE = regexp.MustCompile(`--feature-gates=(\{\{)?([A-Za-z0-9_=,]*)`)

// featureGateMaps returns the values of every featureGates key in the
// YAML documents of docs and in the YAML their strings hold (a
// ConfigMap's KubeletConfiguration, say).
func featureGateMaps(docs []string) []any {
	var out []any
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "featureGates" {
					out = append(out, e)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			if strings.Contains(v, "\n") {
				out = append(out, featureGateMaps([]string{v})...)
			}
		}
	}
	for _, d := range docs {
		for _, doc := range yamlSeparatorRE.Split(d, -1) {
			var v any
			if yaml.Unmarshal([]byte(doc), &v) == nil { // fragments and prose are not YAML
				walk(v)
			}
		}
	}
	return out
}

var (
	yamlBlockRE     = regexp.MustCompile("(?ms)^```ya?ml\\s*\n(.*?)^```")
	yamlSeparatorRE = regexp.MustCompile(`(?m)^---\s*$`)
)

// setFromYAML sets a featureGates map (name: bool) on a copy of the gates.
func setFromYAML(gates any) error {
	m, ok := gates.(map[string]any)
	if !ok && gates != nil {
		return errors.New("not a map of gate names to booleans")
	}
	set := map[string]bool{}
	for name, v := range m {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%s: %v is not a boolean", name, v)
		}
		set[name] = b
	}
	return utilfeature.DefaultMutableFeatureGate.DeepCopy().SetFromMap(set)
}
