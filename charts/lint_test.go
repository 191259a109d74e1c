package charts

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// `helm lint` (Helm's own linter, through its Go SDK) finds nothing to warn
// about in the chart, for every choice the kustomize comparison covers:
// Chart.yaml, values against the schema, every rendered template as
// Kubernetes YAML, deprecated APIs.
func TestHelmLint(t *testing.T) {
	for _, tc := range equivalents {
		t.Run(tc.name, func(t *testing.T) {
			values := parseValues(t, tc.values)
			for _, m := range lint.RunAll("gputopo", values, "gputopo-system").Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m.Error())
				}
			}
		})
	}
}
