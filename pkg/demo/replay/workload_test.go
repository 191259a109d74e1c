package replay

import (
	"strings"
	"testing"
)

func TestParseWorkloadExtendedResource(t *testing.T) {
	ok := `steps: 2
templates:
  plain: {class: gpu.nvidia.com, count: 2, resource: nvidia.com/gpu}
  implicit: {class: mig.nvidia.com, resource: deviceclass.resource.kubernetes.io/mig.nvidia.com}
pods:
- {name: a, template: plain, count: 1, arrive: 0}
`
	w, err := ParseWorkload([]byte(ok), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Templates["plain"]; got.GPUs != 2 || got.Kind != "gpu.nvidia.com" {
		t.Errorf("defaults: %+v", got)
	}
	for _, tc := range []struct{ template, want string }{
		{"{class: gpu.nvidia.com, resource: example.com/gpu}", `templates[x].resource: Unsupported value: "example.com/gpu"`},
		{"{class: mig.nvidia.com, resource: nvidia.com/gpu}", "templates[x].resource: Invalid value: \"nvidia.com/gpu\": only class gpu.nvidia.com serves it"},
		{"{class: gpu.nvidia.com, resource: nvidia.com/gpu, selector: 'true'}", "templates[x].resource: Forbidden"},
		// A claim holds at most 32 devices: more was retried forever.
		{"{class: gpu.nvidia.com, count: 33}", "templates[x].count: Invalid value: 33: must be in 0..32"},
		{"{class: shared.gpu.nvidia.com, memory: -16Gi}", `templates[x].memory: Invalid value: "-16Gi": must be positive`},
		{"{class: shared.gpu.nvidia.com, memory: 16 gigs}", `templates[x].memory: Invalid value: "16 gigs": quantities must match`},
		{"{class: gpu.nvidia.com, selector: 'device.attributes[\"gpu.nvidia.com\"].memory >'}", "templates[x].selector: Invalid value"},
	} {
		bad := "steps: 1\ntemplates:\n  x: " + tc.template + "\npods: []\n"
		if _, err := ParseWorkload([]byte(bad), "bad.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.template, err, tc.want)
		}
	}
}

func TestHeldPercent(t *testing.T) {
	if got := heldPercent([]Point{{10, 90}, {50, 40}, {100, 20}}); got != 50 {
		t.Errorf("held %v, want (10+60+80)/3 = 50", got)
	}
	if departs(Workload{Pods: []PodGroup{{Arrive: 0}}}) || !departs(Workload{Pods: []PodGroup{{Arrive: 0}, {Arrive: 1, Leave: 3}}}) {
		t.Error("departs: wrong for a workload without or with a leaving group")
	}
}

func TestParseWorkloadGroups(t *testing.T) {
	ok := `steps: 2
templates:
  tray: {class: gpu.nvidia.com, count: 4}
pods:
- {name: a, template: tray, count: 9, arrive: 0, group: {topology: nvidia.com/gpu.clique}}
- {name: b, template: tray, count: 4, arrive: 0, group: {minCount: 2}}
- {name: c, template: tray, count: 1, arrive: 1}
`
	w, err := ParseWorkload([]byte(ok), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !w.HasGroups() || w.Pods[0].Group.MinCount != 9 || w.Pods[1].Group.MinCount != 2 || w.Pods[2].Group != nil {
		t.Errorf("groups: %+v %+v %+v", w.Pods[0].Group, w.Pods[1].Group, w.Pods[2].Group)
	}
	for _, tc := range []struct{ group, want string }{
		{"{minCount: 5}", "pods[0].group.minCount: Invalid value: 5: must be in 1..count (4)"},
		{"{minCount: -1}", "pods[0].group.minCount: Invalid value: -1"},
		{"{topology: 'bad key!'}", `pods[0].group.topology: Invalid value: "bad key!"`},
		{"{size: 4}", `unknown field "size"`},
	} {
		bad := "steps: 1\ntemplates:\n  x: {class: gpu.nvidia.com}\npods:\n- {name: a, template: x, count: 4, arrive: 0, group: " + tc.group + "}\n"
		if _, err := ParseWorkload([]byte(bad), "bad.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.group, err, tc.want)
		}
	}
}

func TestRackLabels(t *testing.T) {
	if got := rackOf("gputopo", "gputopo-rack-a-17"); got != "rack-a" {
		t.Errorf("rackOf = %q", got)
	}
	if got := byIndex("x-rack-2", "x-rack-10"); got >= 0 {
		t.Errorf("byIndex: tray 2 after tray 10")
	}
}

// A negative count toward the workload, and a
// leave the replay never reaches, are refused with their field.
func TestParseWorkloadRefusesCountsAndStepsOutOfRange(t *testing.T) {
	for _, tc := range []struct{ template, pod, want string }{
		{"{class: gpu.nvidia.com, gpus: -3}", "{name: a, template: x, count: 1, arrive: 0}", "templates[x].gpus: Invalid value: -3"},
		{"{class: gpu.nvidia.com, count: 2, gpus: 1e308}", "{name: a, template: x, count: 1, arrive: 0}", "templates[x].gpus: Invalid value: 1e+308: must be in 0..2, the devices the claim holds"},
		{"{class: shared.gpu.nvidia.com, compute: 150}", "{name: a, template: x, count: 1, arrive: 0}", "templates[x].compute: Invalid value: \"150\": must be at most 100, a shared GPU's compute"},
		{"{class: gpu.nvidia.com}", "{name: a, template: x, count: 1, arrive: 0, leave: 99}", "pods[0].leave: Invalid value: 99: must be a step after arrive, in 1..1"},
		{"{class: gpu.nvidia.com}", "{name: a, template: x, count: 1, arrive: 1, leave: 1}", "pods[0].leave: Invalid value: 1: must be 0: the pods arrive at the last step"},
	} {
		bad := "steps: 2\ntemplates:\n  x: " + tc.template + "\npods:\n- " + tc.pod + "\n"
		if _, err := ParseWorkload([]byte(bad), "bad.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s / %s: error %v, want one containing %q", tc.template, tc.pod, err, tc.want)
		}
	}
	// Mistyped sizes fail at once instead of running for days.
	for body, want := range map[string]string{
		"steps: 1000000\ntemplates: {}\npods: []\n": "steps: Invalid value: 1000000: must be in 1..1000",
		"steps: 1\npods: []\n":                      "pods: Required value: a workload needs at least one pod",
		"steps: 2\ntemplates:\n  x: {class: gpu.nvidia.com}\npods:\n- {name: a, template: x, count: 100000, arrive: 0}\n":                                                   "pods[0].count: Invalid value: 100000: must be in 1..20000",
		"steps: 2\ntemplates:\n  x: {class: gpu.nvidia.com}\npods:\n- {name: a, template: x, count: 15000, arrive: 0}\n- {name: b, template: x, count: 15000, arrive: 1}\n": "pods: Invalid value: 30000: 30000 pods in all; at most 20000",
	} {
		if _, err := ParseWorkload([]byte(body), "bad.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", body, err, want)
		}
	}
	// An invalid steps is said once, not again for every arrive.
	zero := "steps: 0\ntemplates:\n  x: {class: gpu.nvidia.com}\npods:\n- {name: a, template: x, count: 1, arrive: 0}\n"
	if _, err := ParseWorkload([]byte(zero), "bad.yaml"); err == nil || strings.Contains(err.Error(), "arrive") {
		t.Errorf("steps 0: error %v, want one about steps only", err)
	}
	ok := "steps: 2\ntemplates:\n  x: {class: gpu.nvidia.com}\npods:\n- {name: a, template: x, count: 1, arrive: 0, leave: 1}\n"
	if _, err := ParseWorkload([]byte(ok), "ok.yaml"); err != nil {
		t.Errorf("leave at the last step: %v", err)
	}
}

// Names that would fail only once the control plane runs are refused with
// the file and field: claim templates are objects, pods are <name>-<k>.
func TestParseWorkloadNames(t *testing.T) {
	for _, tc := range []struct{ workload, want string }{
		{"steps: 1\ntemplates:\n  T_1: {class: gpu.nvidia.com}\npods: []\n", "templates[T_1]: Invalid value: \"T_1\": the claim template's name"},
		{"steps: 1\ntemplates:\n  t: {class: gpu.nvidia.com}\npods:\n- {name: Train, template: t, count: 1, arrive: 0}\n", "pods[0].name: Invalid value: \"Train\": its pods' names"},
		{"steps: 1\ntemplates:\n  t: {class: gpu.nvidia.com}\npods:\n- {name: " + strings.Repeat("a", 62) + ", template: t, count: 10, arrive: 0}\n", "pods[0].name: Invalid value"},
	} {
		if _, err := ParseWorkload([]byte(tc.workload), "w.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "w.yaml: ") {
			t.Errorf("error %v, want one from w.yaml containing %q", err, tc.want)
		}
	}
}
