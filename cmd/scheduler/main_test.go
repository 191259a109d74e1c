package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/version"
)

func TestVersionRequest(t *testing.T) {
	tests := []struct {
		args []string
		want version.Request
	}{
		{nil, ""},
		{[]string{"--config=/etc/kubernetes/scheduler.yaml", "-v=4"}, ""},
		{[]string{"--version"}, "true"},
		{[]string{"--config", "c.yaml", "--version=true"}, "true"},
		{[]string{"--version=1"}, "true"},
		{[]string{"--version=raw"}, "raw"},
		{[]string{"--version=false"}, ""},
		{[]string{"--version", "--version=false"}, ""},
		{[]string{"--version=false", "--version"}, "true"},
		// kube-scheduler's: sets the reported Kubernetes version, runs on.
		{[]string{"--version=v1.37.0"}, ""},
		{[]string{"--", "--version"}, ""},
		{[]string{"--versions"}, ""},
	}
	for _, tc := range tests {
		if got := versionRequest(tc.args); got != tc.want {
			t.Errorf("versionRequest(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// A --config that kube-scheduler would take but not as meant, or refuse
// without saying where, is refused naming the file and the field; one
// that kube-scheduler reports well itself is left to it.
func TestCheckConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, profile string) string {
		p := filepath.Join(dir, name)
		data := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: gputopo-scheduler\n" + profile
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{write("ok.yaml", "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n  pluginConfig:\n  - name: GPUTopology\n    args: {linkClassCost: 2}\n"), nil},
		{write("elsewhere.yaml", "  pluginConfig:\n  - name: GPUTopology\n    args: {linkClassCost: 2}\n"), []string{"elsewhere.yaml", `pluginConfig[0].name: Invalid value: "GPUTopology": profile gputopo-scheduler does not enable this plugin`}},
		{write("typo.yaml", "  pluginConfig:\n  - name: GPUTopolgy\n    args: {linkClassCost: 2}\n"), []string{"typo.yaml", `pluginConfig[0].name: Invalid value: "GPUTopolgy"`}},
		{write("inf.yaml", "  pluginConfig:\n  - name: GPUTopology\n    args: {hostPressure: .inf}\n"), []string{"inf.yaml", "pluginConfig[0].args.hostPressure", "finite"}},
		{write("unknown.yaml", "  bogus: 1\n"), nil}, // kube-scheduler's strict decoding says so itself
		{filepath.Join(dir, "missing.yaml"), nil},
	} {
		err := checkConfigFile(tc.path)
		if tc.want == nil && err != nil {
			t.Errorf("%s: %v", tc.path, err)
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to contain %q", tc.path, err, w)
			}
		}
	}
}
