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
