package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The chart and the kustomize manifests are two ways to install the same
// objects. These are the differences on purpose; everything else must be
// equal, object for object, field for field.
var (
	// Helm's bookkeeping labels on every object.
	helmLabels = []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart"}
	// What makes a configuration change restart the pods: the chart's
	// hash of the ConfigMap in the pod templates (`helm upgrade` with new
	// values), and an overlay's mark on its pod template (applying it
	// over its base).
	restartAnnotations = []string{"checksum/config", "gputopo.io/config"}
	// The chart creates no Namespace: `helm install -n NS
	// --create-namespace` does, and Helm owns no namespace it installs into.
	skippedKinds = []string{"Namespace"}
)

// equivalents lists, for chart values, the kustomize directories (under
// manifests/) that install the same; a later directory's object replaces
// an earlier one of the same kind and name (the extended-resource
// overlay's classes).
var equivalents = []struct {
	name   string
	values string
	dirs   []string
}{
	{"defaults", ``, []string{"scheduler", "nodeagent", "kubectl"}},
	{"second scheduler", `mode: second-scheduler`, []string{"scheduler/second-scheduler", "nodeagent", "kubectl"}},
	{"pod groups and clique label", "podGroups: {enabled: true}\nnodeAgent: {cliqueLabel: true}", []string{"pod-groups", "nodeagent-clique-label", "kubectl"}},
	{"mig", "nodeAgent: {config: {gpus: [{product: A100, mode: mig}]}}", []string{"scheduler", "nodeagent-mig", "kubectl"}},
	{"extended resource", `deviceClasses: {extendedResource: true}`, []string{"scheduler", "scheduler/extended-resource", "nodeagent", "kubectl"}},
	{"scheduler only", "nodeAgent: {enabled: false}\nviewer: {create: false}", []string{"scheduler"}},
	{"node agent only", "scheduler: {enabled: false}\ndeviceClasses: {create: false}\nviewer: {create: false}", []string{"nodeagent"}},
	{"classes only", "scheduler: {enabled: false}\nnodeAgent: {enabled: false}\nviewer: {create: false}", []string{"scheduler/deviceclasses"}},
}

func TestChartEqualsKustomize(t *testing.T) {
	for _, tc := range equivalents {
		t.Run(tc.name, func(t *testing.T) {
			kustomized := map[string]map[string]any{}
			for _, dir := range tc.dirs {
				for key, obj := range kustomize(t, filepath.Join("..", "manifests", dir)) {
					kustomized[key] = obj
				}
			}
			compareWithChart(t, tc.values, kustomized, "manifests/"+strings.Join(tc.dirs, ", manifests/"))
		})
	}
}

// The MIG rule with the clique label has no overlay of its own: a user
// combines the two as docs/install.md says, in a directory of their own,
// since kustomize loads patches only from within it.
func TestChartEqualsKustomizeMIGWithCliqueLabel(t *testing.T) {
	dir := t.TempDir()
	mig := filepath.Join("..", "manifests", "nodeagent-mig")
	for _, f := range []string{"daemonset.yaml", "configmap.yaml"} {
		b, err := os.ReadFile(filepath.Join(mig, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "configmap.yaml" {
			b = append(b, "    cliqueLabel: true\n"...)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Relative, as kustomize takes no absolute base.
	abs, err := filepath.Abs(filepath.Join("..", "manifests", "nodeagent-clique-label"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "resources: [" + base + "]\npatches: [{path: daemonset.yaml}, {path: configmap.yaml}]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	kustomized := kustomize(t, filepath.Join("..", "manifests", "scheduler"))
	for _, d := range []string{dir, filepath.Join("..", "manifests", "kubectl")} {
		for key, obj := range kustomize(t, d) {
			kustomized[key] = obj
		}
	}
	compareWithChart(t, "nodeAgent: {cliqueLabel: true, config: {gpus: [{product: A100, mode: mig}]}}", kustomized, "manifests/scheduler, the user's kustomization, manifests/kubectl")
}

// compareWithChart renders the chart with values and wants the kustomized
// objects (from source), object for object.
func compareWithChart(t *testing.T, values string, kustomized map[string]map[string]any, source string) {
	t.Helper()
	ms, err := Render("gputopo", "gputopo-system", parseValues(t, values))
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	chart := objectsOf(t, "chart", ms)
	for _, key := range sortedKeys(kustomized, chart) {
		want, inKustomize := kustomized[key]
		got, inChart := chart[key]
		switch {
		case !inChart:
			t.Errorf("%s: in %s, not in the chart", key, source)
		case !inKustomize:
			t.Errorf("%s: in the chart, not in %s", key, source)
		default:
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s differs (-kustomize +chart):\n%s", key, diff)
			}
		}
	}
}

// objectsOf decodes rendered manifests, keyed kind/namespace/name, without
// the differences on purpose.
func objectsOf(t *testing.T, source string, ms []Manifest) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range ms {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(m.YAML), &obj); err != nil {
			t.Fatalf("%s %s: %v", source, m.Template, err)
		}
		if obj == nil {
			continue
		}
		add(t, out, normalize(obj), source+" "+m.Template)
	}
	return out
}

// kustomize builds dir as `kubectl apply -k` does.
func kustomize(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := map[string]map[string]any{}
	for _, r := range res.Resources() {
		// Through JSON, as the chart's YAML is read: numbers as float64.
		raw, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		add(t, out, normalize(obj), dir)
	}
	return out
}

func add(t *testing.T, into map[string]map[string]any, obj map[string]any, source string) {
	t.Helper()
	if obj == nil {
		return
	}
	key := keyOf(obj)
	if _, dup := into[key]; dup {
		t.Fatalf("%s: %s twice", source, key)
	}
	into[key] = obj
}

func keyOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	return fmt.Sprintf("%s %v/%v", obj["kind"], meta["namespace"], meta["name"])
}

// normalize drops the differences on purpose and decodes the YAML files a
// ConfigMap holds, so that comments and key order do not count.
func normalize(obj map[string]any) map[string]any {
	if kind, _ := obj["kind"].(string); slices.Contains(skippedKinds, kind) {
		return nil
	}
	stripMeta(obj["metadata"])
	if spec, ok := obj["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			stripMeta(tmpl["metadata"])
		}
	}
	if data, ok := obj["data"].(map[string]any); ok {
		for name, v := range data {
			s, isString := v.(string)
			if !isString || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
				continue
			}
			var decoded any
			if err := yaml.Unmarshal([]byte(s), &decoded); err == nil {
				data[name] = decoded
			}
		}
	}
	return obj
}

func stripMeta(m any) {
	meta, ok := m.(map[string]any)
	if !ok {
		return
	}
	for field, keys := range map[string][]string{"labels": helmLabels, "annotations": restartAnnotations} {
		values, ok := meta[field].(map[string]any)
		if !ok {
			continue
		}
		for _, k := range keys {
			delete(values, k)
		}
		if len(values) == 0 {
			delete(meta, field)
		}
	}
}

func sortedKeys(maps ...map[string]map[string]any) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}
