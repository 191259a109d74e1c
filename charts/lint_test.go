package charts

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"sigs.k8s.io/yaml"
)

// `helm lint` (Helm's own linter, through its Go SDK) finds nothing to warn
// about in the chart, for every choice the kustomize comparison covers:
// Chart.yaml, values against the schema, every rendered template as
// Kubernetes YAML, deprecated APIs.
func TestHelmLint(t *testing.T) {
	for _, tc := range equivalents {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			for _, m := range lint.RunAll("gputopo", values, "gputopo-system").Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m.Error())
				}
			}
		})
	}
}
