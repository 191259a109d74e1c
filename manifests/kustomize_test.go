package manifests

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

func TestKustomizationsBuild(t *testing.T) {
	tests := []struct {
		dir       string
		wantKinds []string
		profiles  int // profiles in the scheduler ConfigMap, 0 if none
	}{
		{"scheduler", []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "DeviceClass"}, 2},
		{"scheduler/second-scheduler", []string{"Namespace", "ServiceAccount", "ClusterRole", "Deployment", "PodDisruptionBudget", "ConfigMap", "DeviceClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, 1},
		{"scheduler/deviceclasses", []string{"DeviceClass"}, 0},
		{"scheduler/extended-resource", []string{"DeviceClass"}, 0},
		{"pod-groups", []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "DeviceClass"}, 2},
		{"nodeagent", []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap", "DaemonSet"}, 0},
		{"nodeagent-clique-label", []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap", "DaemonSet"}, 0},
		{"nodeagent-mig", []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap", "DaemonSet"}, 0},
		{"kubectl", []string{"ClusterRole", "ServiceAccount", "ClusterRoleBinding"}, 0},
		{"grafana", []string{"ConfigMap"}, 0},
		{"examples", []string{"ResourceClaimTemplate"}, 0},
		{"examples/pods", []string{"Pod"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			res := build(t, tc.dir)
			var kinds []string
			for _, r := range res.Resources() {
				kinds = append(kinds, r.GetKind())
				if r.GetKind() == "ClusterRole" || r.GetKind() == "Role" {
					if y, _ := r.AsYAML(); strings.Contains(string(y), "'*'") || strings.Contains(string(y), "\"*\"") {
						t.Errorf("%s %s has a wildcard", r.GetKind(), r.GetName())
					}
				}
				if agent, ok := r.GetDataMap()["nodeagent.yaml"]; ok {
					path := filepath.Join(t.TempDir(), "nodeagent.yaml")
					if err := os.WriteFile(path, []byte(agent), 0o600); err != nil {
						t.Fatal(err)
					}
					if _, err := config.Load(path); err != nil {
						t.Errorf("node agent ConfigMap: %v", err)
					}
				}
				if r.GetKind() == "ConfigMap" {
					data := r.GetDataMap()["scheduler-config.yaml"]
					if n := countProfiles(data); n != tc.profiles {
						t.Errorf("ConfigMap has %d profiles, want %d", n, tc.profiles)
					}
				}
			}
			for _, want := range tc.wantKinds {
				if !slices.Contains(kinds, want) {
					t.Errorf("kinds %v lack %s", kinds, want)
				}
			}
		})
	}
}

// countProfiles counts the profiles' list entries ("- schedulerName:").
func countProfiles(config string) int {
	n := 0
	for _, line := range strings.Split(config, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "- schedulerName:") {
			n++
		}
	}
	return n
}

// The extended-resource overlay names nvidia.com/gpu on the whole-GPU
// class only: one class per resource name.
func TestExtendedResourceOverlay(t *testing.T) {
	res := build(t, "scheduler/extended-resource")
	named := map[string]string{}
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := m["spec"].(map[string]any)
		if name, ok := spec["extendedResourceName"].(string); ok {
			named[r.GetName()] = name
		}
	}
	if want := map[string]string{"gpu.nvidia.com": "nvidia.com/gpu"}; !maps.Equal(named, want) {
		t.Errorf("extendedResourceName by class: %v, want %v", named, want)
	}
}

// The node agent overlays' configurations are the base's with one change
// each: cliqueLabel on, or the example MIG rule uncommented.
func TestNodeAgentOverlaysKeepBaseConfig(t *testing.T) {
	read := func(path string) string {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(raw, &cm); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return cm.Data["nodeagent.yaml"]
	}
	base := read("nodeagent/configmap.yaml")
	const commentedRules = "# gpus:\n# - product: A100\n#   mode: mig\n# - product: L40S\n#   mode: shared\n"
	if !strings.Contains(base, commentedRules) {
		t.Fatalf("nodeagent/configmap.yaml no longer holds the example rules:\n%s", base)
	}
	for overlay, want := range map[string]string{
		"nodeagent-clique-label": base + "cliqueLabel: true\n",
		"nodeagent-mig":          strings.Replace(base, commentedRules, "gpus:\n- product: A100\n  mode: mig\n", 1),
	} {
		if got := read(overlay + "/configmap.yaml"); got != want {
			t.Errorf("%s/configmap.yaml:\n%s\nwant the base's configuration with one change:\n%s", overlay, got, want)
		}
	}
}

// Only the MIG overlay gives the agent a capability, and only SYS_ADMIN.
func TestNodeAgentCapabilities(t *testing.T) {
	for dir, want := range map[string][]any{"nodeagent": nil, "nodeagent-clique-label": nil, "nodeagent-mig": {"SYS_ADMIN"}} {
		for _, r := range build(t, dir).Resources() {
			if r.GetKind() != "DaemonSet" {
				continue
			}
			m, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			c := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			caps := c["securityContext"].(map[string]any)["capabilities"].(map[string]any)
			got, _ := caps["add"].([]any)
			if !slices.Equal(got, want) || fmt.Sprint(caps["drop"]) != "[ALL]" {
				t.Errorf("%s: capabilities %v, want every one dropped and %v added", dir, caps, want)
			}
		}
	}
}

// build runs kustomize on dir (under manifests/) as `kubectl apply -k`
// does.
func build(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return res
}

// The example overlay that installs the scheduler into another namespace
// moves everything but what must stay in kube-system, and every binding
// names the moved ServiceAccount.
func TestOtherNamespaceOverlay(t *testing.T) {
	res := build(t, "examples/other-namespace")
	inKubeSystem := []string{"Role/gputopo-scheduler-leader-election", "RoleBinding/gputopo-scheduler-leader-election", "RoleBinding/gputopo-scheduler-authentication-reader"}
	for _, r := range res.Resources() {
		id := r.GetKind() + "/" + r.GetName()
		want := "gpu-sched"
		if slices.Contains(inKubeSystem, id) {
			want = "kube-system"
		}
		if r.GetKind() == "Namespace" {
			if r.GetName() != "gpu-sched" {
				t.Errorf("Namespace %s, want gpu-sched", r.GetName())
			}
		} else if ns := r.GetNamespace(); r.GetKind() != "ClusterRole" && r.GetKind() != "ClusterRoleBinding" && r.GetKind() != "DeviceClass" && ns != want {
			t.Errorf("%s in namespace %q, want %q", id, ns, want)
		}
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		subjects, _ := m["subjects"].([]any)
		for _, s := range subjects {
			if s := s.(map[string]any); s["kind"] == "ServiceAccount" && s["namespace"] != "gpu-sched" {
				t.Errorf("%s binds ServiceAccount %v/%v, want it in gpu-sched", id, s["namespace"], s["name"])
			}
		}
	}
}

// The agent reads its configuration once, at start: an overlay that
// changes it must change the DaemonSet's pod template too, so that
// applying it over ../nodeagent restarts the agents. (The scheduler's
// two modes differ in their ConfigMap alone on purpose: a rolling update
// between them would let two leaders allocate at once, so docs/install.md
// has the Deployment scaled to zero first, and the new pods read the new
// configuration.)
func TestNodeAgentOverlaysRestartTheAgents(t *testing.T) {
	parts := func(dir string) (config, template string) {
		for _, r := range build(t, dir).Resources() {
			m, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			switch r.GetKind() {
			case "ConfigMap":
				config = fmt.Sprint(m["data"])
			case "DaemonSet":
				template = fmt.Sprint(m["spec"].(map[string]any)["template"])
			}
		}
		return config, template
	}
	baseConfig, baseTemplate := parts("nodeagent")
	for _, overlay := range []string{"nodeagent-clique-label", "nodeagent-mig"} {
		config, template := parts(overlay)
		if config != baseConfig && template == baseTemplate {
			t.Errorf("%s changes the agent's configuration but not its pod template: applying it over nodeagent would not restart the agents", overlay)
		}
	}
}

// The node agent's own-node admission policies keep applying when an
// overlay moves the agent into another namespace (kustomize does not
// change the strings of their CEL): their match condition, evaluated as
// the API server evaluates it, matches the moved agent's account and no
// other account.
func TestOwnNodePoliciesFollowTheAgent(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	matches := func(expr, user string) bool {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": user}}})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return out.Value() == true
	}
	for _, base := range []string{"nodeagent", "nodeagent-clique-label", "nodeagent-mig"} {
		dir := t.TempDir()
		abs, err := filepath.Abs(base)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, abs) // kustomize takes no absolute base
		if err != nil {
			t.Fatal(err)
		}
		overlay := fmt.Sprintf("namespace: gpu-ops\nresources:\n- %s\n", rel)
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
			t.Fatal(err)
		}
		res := build(t, dir)
		var agent string
		var conditions []string
		for _, r := range res.Resources() {
			switch r.GetKind() {
			case "ServiceAccount":
				agent = "system:serviceaccount:" + r.GetNamespace() + ":" + r.GetName()
			case "ValidatingAdmissionPolicy":
				m, err := r.Map()
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range m["spec"].(map[string]any)["matchConditions"].([]any) {
					conditions = append(conditions, c.(map[string]any)["expression"].(string))
				}
			}
		}
		if agent != "system:serviceaccount:gpu-ops:gputopo-nodeagent" || len(conditions) == 0 {
			t.Fatalf("%s moved: agent %q, %d policy conditions", base, agent, len(conditions))
		}
		for _, expr := range conditions {
			if !matches(expr, agent) {
				t.Errorf("%s moved to gpu-ops: condition %s does not match the agent %s, so its policy stops applying", base, expr, agent)
			}
			for _, other := range []string{"system:serviceaccount:gpu-ops:gputopo-scheduler", "system:serviceaccount:gpu-ops:gputopo-nodeagent-x", "system:node:n1", "admin"} {
				if matches(expr, other) {
					t.Errorf("%s: condition %s matches %s", base, expr, other)
				}
			}
		}
	}
}
