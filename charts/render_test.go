package charts

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// parseValues reads values as a -f file gives them.
func parseValues(t *testing.T, values string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func renderValues(t *testing.T, namespace, values string) map[string]map[string]any {
	t.Helper()
	ms, err := Render("gputopo", namespace, parseValues(t, values))
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return objectsOf(t, "chart", ms)
}

// Bad values fail at `helm install`/`helm template` with the field named,
// before anything reaches the cluster.
func TestBadValues(t *testing.T) {
	tests := []struct{ values, want string }{
		{`mode: primary`, "/mode"},
		{`nodeagent: {enabled: false}`, "nodeagent"},
		{`scheduler: {replicas: 0}`, "/scheduler/replicas"},
		{`scheduler: {percentageOfNodesToScore: 101}`, "/scheduler/percentageOfNodesToScore"},
		{`scheduler: {weights: {GPUTopology: 0}}`, "/scheduler/weights/GPUTopology"},
		{`scheduler: {featureGates: {GenericWorkload: "yes"}}`, "/scheduler/featureGates/GenericWorkload"},
		{`scheduler: {featureGates: {CompositePodGroup: true}}`, "/scheduler/featureGates/CompositePodGroup"},
		{`scheduler: {featureGates: {CoordinatedLeaderElection: true}}`, "/scheduler/featureGates/CoordinatedLeaderElection"},
		{`scheduler: {image: {repository: ""}}`, "/scheduler/image/repository"},
		{`nodeAgent: {config: {driverName: gpu.example.com}}`, "/nodeAgent/config/driverName"},
		{`podGroups: true`, "/podGroups"},
		{`scheduler: {featureGates: {"x,y=z": true}}`, "invalid propertyName 'x,y=z'"},
		{"podGroups: {enabled: true}\nscheduler: {featureGates: {GenericWorkload: false}}", "scheduler.featureGates.GenericWorkload: false, but podGroups.enabled needs it on"},
		// The node agent's configuration, which it refuses at start on
		// every GPU node.
		{`nodeAgent: {config: {defaultMode: partitioned}}`, "/nodeAgent/config/defaultMode"},
		{`nodeAgent: {config: {defaultmode: mig}}`, "defaultmode"},
		{`nodeAgent: {config: {gpus: [{mode: Mig, product: A100}]}}`, "/nodeAgent/config/gpus/0/mode"},
		{`nodeAgent: {config: {gpus: {product: A100, mode: mig}}}`, "/nodeAgent/config/gpus"},
		{`nodeAgent: {config: {gpus: [{mode: mig}]}}`, "/nodeAgent/config/gpus/0"},
		{`nodeAgent: {config: {shared: {memoryStep: 0}}}`, "/nodeAgent/config/shared/memoryStep"},
		{`nodeAgent: {config: {shared: {memoryStep: 1G}}}`, "/nodeAgent/config/shared/memoryStep"},
		{`nodeAgent: {config: {health: {recoverAfter: 5 min}}}`, "/nodeAgent/config/health/recoverAfter"},
		{`nodeAgent: {config: {cliqueLabel: "false"}}`, "/nodeAgent/config/cliqueLabel"},
		// A value set to null is deleted before the schema sees it.
		{`scheduler: {logLevel: null}`, "logLevel"},
		{`mode: null`, "mode"},
		{`nodeAgent: {config: null}`, "config"},
		// Upstream requires a shape with this strategy; the chart has no value for one.
		{`scheduler: {nodeResourcesFitScoring: RequestedToCapacityRatio}`, "/scheduler/nodeResourcesFitScoring"},
	}
	for _, tc := range tests {
		t.Run(tc.values, func(t *testing.T) {
			_, err := Render("gputopo", "gputopo-system", parseValues(t, tc.values))
			if err == nil {
				t.Fatalf("rendered; want an error naming %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

// Installed into another namespace, every namespaced object, every
// subject and both admission policies' user names follow it.
func TestOtherNamespace(t *testing.T) {
	objs := renderValues(t, "gpu-sched", "mode: second-scheduler\nnodeAgent: {cliqueLabel: true}")
	for key, obj := range objs {
		y, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		s := string(y)
		if strings.Contains(s, "gputopo-system") {
			t.Errorf("%s still names gputopo-system:\n%s", key, s)
		}
	}
	for _, want := range []string{
		"RoleBinding kube-system/gputopo-scheduler-authentication-reader",
		"Deployment gpu-sched/gputopo-scheduler",
		"DaemonSet gpu-sched/gputopo-nodeagent",
	} {
		if objs[want] == nil {
			t.Errorf("no %s", want)
		}
	}
	for key, user := range map[string]string{
		// The node agent's policies match its account in any namespace
		// (manifests' TestOwnNodePoliciesFollowTheAgent).
		"ValidatingAdmissionPolicy <nil>/gputopo-device-partition": "system:serviceaccount:gpu-sched:gputopo-scheduler",
	} {
		y, _ := yaml.Marshal(objs[key])
		if !strings.Contains(string(y), user) {
			t.Errorf("%s does not match user %s:\n%s", key, user, y)
		}
	}
	cfg, _ := yaml.Marshal(objs["ConfigMap gpu-sched/gputopo-scheduler-config"]["data"])
	if !strings.Contains(string(cfg), "resourceNamespace: gpu-sched") {
		t.Errorf("leader election not in the release's namespace:\n%s", cfg)
	}
	// Replacing kube-scheduler, gputopo takes kube-scheduler's own lease.
	objs = renderValues(t, "gpu-sched", "")
	cfg, _ = yaml.Marshal(objs["ConfigMap gpu-sched/gputopo-scheduler-config"]["data"])
	if !strings.Contains(string(cfg), "resourceNamespace: kube-system") || !strings.Contains(string(cfg), "resourceName: kube-scheduler") {
		t.Errorf("leader election as the cluster's scheduler not on kube-system/kube-scheduler:\n%s", cfg)
	}
	if _, ok := objs["Role kube-system/gputopo-scheduler-leader-election"]; !ok {
		t.Error("no Role for kube-scheduler's lease in kube-system")
	}
}

// Profile args, gates and images come from the values.
func TestValuesReachTheObjects(t *testing.T) {
	objs := renderValues(t, "gputopo-system", `
podGroups: {enabled: true}
scheduler:
  featureGates: {DRAPartitionableDevices: false}
  image: {repository: registry.example.com/sched, tag: v9, pullPolicy: Always}
  logLevel: 4
  percentageOfNodesToScore: 25
  gpuTopologyArgs: {hostPressure: 0.5, searchBudget: 500}
  gpuCliquePlacementArgs: {maxPlacements: 8}
nodeAgent:
  image: {repository: registry.example.com/agent}
  config: {driverName: gpu.nvidia.com, defaultMode: shared}
`)
	y, _ := yaml.Marshal(objs["Deployment gputopo-system/gputopo-scheduler"])
	for _, want := range []string{
		"--feature-gates=DRAPartitionableDevices=false,DRAWorkloadResourceClaims=true,GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		"image: registry.example.com/sched:v9", "imagePullPolicy: Always", "--v=4",
	} {
		if !strings.Contains(string(y), want) {
			t.Errorf("Deployment lacks %q:\n%s", want, y)
		}
	}
	cfg := objs["ConfigMap gputopo-system/gputopo-scheduler-config"]["data"].(map[string]any)["scheduler-config.yaml"]
	y, _ = yaml.Marshal(cfg)
	for _, want := range []string{"percentageOfNodesToScore: 25", "hostPressure: 0.5", "searchBudget: 500", "kind: GPUCliquePlacementArgs", "maxPlacements: 8", "filterTimeout: 10s"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("scheduler configuration lacks %q:\n%s", want, y)
		}
	}
	y, _ = yaml.Marshal(objs["DaemonSet gputopo-system/gputopo-nodeagent"])
	if !strings.Contains(string(y), "image: registry.example.com/agent:"+appVersion(t)) {
		t.Errorf("DaemonSet image is not the repository at the chart's appVersion:\n%s", y)
	}
	agent := objs["ConfigMap gputopo-system/gputopo-nodeagent"]["data"].(map[string]any)["nodeagent.yaml"]
	if y, _ := yaml.Marshal(agent); !strings.Contains(string(y), "defaultMode: shared") || !strings.Contains(string(y), "recoverAfter: 5m") {
		t.Errorf("node agent configuration does not merge the values with the defaults:\n%s", y)
	}
}

// gpuTopologyArgs: null (the way to ask for the plugin's own defaults,
// since {} merges with the chart's) renders args of the kind alone.
func TestCodeDefaultArgs(t *testing.T) {
	objs := renderValues(t, "gputopo-system", "scheduler: {gpuTopologyArgs: null}\n")
	// objectsOf parses the file; a scalar means it did not parse as YAML.
	data, err := yaml.Marshal(objs["ConfigMap gputopo-system/gputopo-scheduler-config"]["data"].(map[string]any)["scheduler-config.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Profiles []struct {
			PluginConfig []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("scheduler configuration: %v\n%s", err, data)
	}
	found := false
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			if pc.Name == "GPUTopology" {
				found = true
				if len(pc.Args) != 2 || pc.Args["kind"] != "GPUTopologyArgs" {
					t.Errorf("GPUTopology args %v, want apiVersion and kind only", pc.Args)
				}
			}
		}
	}
	if !found {
		t.Errorf("no GPUTopology args:\n%s", data)
	}
}

// The node agent gets SYS_ADMIN and the MIG configuration devices only
// when its config puts a GPU in MIG mode, by default or by a rule.
func TestNodeAgentPrivilegeFollowsMIG(t *testing.T) {
	for _, tc := range []struct {
		values string
		mig    bool
	}{
		{values: ``},
		{values: `nodeAgent: {config: {defaultMode: shared, gpus: [{product: L40S, mode: whole}]}}`},
		{values: `nodeAgent: {config: {defaultMode: mig}}`, mig: true},
		{values: `nodeAgent: {config: {gpus: [{product: L40S, mode: shared}, {indexes: [3], mode: mig}]}}`, mig: true},
	} {
		y, _ := yaml.Marshal(renderValues(t, "gputopo-system", tc.values)["DaemonSet gputopo-system/gputopo-nodeagent"])
		for _, want := range []string{"- SYS_ADMIN", "NVIDIA_MIG_CONFIG_DEVICES"} {
			if got := strings.Contains(string(y), want); got != tc.mig {
				t.Errorf("values %q: DaemonSet has %s: %v, want %v", tc.values, want, got, tc.mig)
			}
		}
	}
}

// The clique label asked for either way (the chart's value or the
// agent's own configuration) comes with the role that lets the agent
// patch its node, and the policy that keeps it to that label.
func TestCliqueLabelBringsItsRole(t *testing.T) {
	for _, values := range []string{`nodeAgent: {cliqueLabel: true}`, `nodeAgent: {config: {cliqueLabel: true}}`} {
		objs := renderValues(t, "gputopo-system", values)
		y, _ := yaml.Marshal(objs["ConfigMap gputopo-system/gputopo-nodeagent"])
		if !strings.Contains(string(y), "cliqueLabel: true") {
			t.Errorf("values %q: agent configuration without cliqueLabel:\n%s", values, y)
		}
		var role, policy bool
		for key := range objs {
			role = role || strings.HasPrefix(key, "ClusterRole ") && strings.Contains(key, "clique")
			policy = policy || strings.HasPrefix(key, "ValidatingAdmissionPolicy ") && strings.Contains(key, "clique")
		}
		if !role || !policy {
			t.Errorf("values %q: node-patch role %v, admission policy %v; want both", values, role, policy)
		}
	}
}

// The images' tag is the release version (../VERSION).
func TestAppVersionIsTheRelease(t *testing.T) {
	raw, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := appVersion(t), strings.TrimSpace(string(raw)); got != want {
		t.Errorf("Chart.yaml appVersion %s, VERSION %s", got, want)
	}
}

func appVersion(t *testing.T) string {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c.Metadata.AppVersion
}

func TestNotes(t *testing.T) {
	notes, err := Notes("gputopo", "gputopo-system", map[string]any{"podGroups": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"schedulerName: gputopo-scheduler", "--runtime-config=scheduling.k8s.io/v1beta1=true", "kubectl gputopo nodes"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
}

// The priority classes come from the values ("" for none), and the
// scheduler's disruption budget only with replicas to spare: with one,
// minAvailable 1 would block every drain of its node.
func TestPriorityClassesAndDisruptionBudget(t *testing.T) {
	objs := renderValues(t, "gputopo-system", `
scheduler: {priorityClassName: gputopo-critical, replicas: 1}
nodeAgent: {priorityClassName: ""}
`)
	if y, _ := yaml.Marshal(objs["Deployment gputopo-system/gputopo-scheduler"]); !strings.Contains(string(y), "priorityClassName: gputopo-critical") {
		t.Errorf("Deployment without the value's priority class:\n%s", y)
	}
	if y, _ := yaml.Marshal(objs["DaemonSet gputopo-system/gputopo-nodeagent"]); strings.Contains(string(y), "priorityClassName") {
		t.Errorf("DaemonSet has a priority class, want none:\n%s", y)
	}
	if pdb, ok := objs["PodDisruptionBudget gputopo-system/gputopo-scheduler"]; ok {
		t.Errorf("one replica with a PodDisruptionBudget: %v", pdb)
	}
}

// null is how a user drops a map the chart sets by default ({} merges
// with it): the node agent without a node selector, tolerations or
// resources, the scheduler without resources.
func TestNullDropsMapDefaults(t *testing.T) {
	objs := renderValues(t, "gputopo-system", "nodeAgent: {nodeSelector: null, tolerations: null, resources: null}\nscheduler: {resources: null}\n")
	ds, err := yaml.Marshal(objs["DaemonSet gputopo-system/gputopo-nodeagent"])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ds), "nvidia.com/gpu.present") || strings.Contains(string(ds), "memory: 256Mi") {
		t.Errorf("the node agent keeps a default dropped with null:\n%s", ds)
	}
}
