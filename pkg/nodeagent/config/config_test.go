package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name, body string
		wantErr    []string
		check      func(config.Config) bool
	}{
		{"defaults", "", nil, func(c config.Config) bool {
			return c.DriverName == "gpu.nvidia.com" && c.DefaultMode == config.Whole && c.Shared.DefaultMemory.String() == "8Gi" &&
				c.Health.FlapThreshold == 3 && c.Health.FlapWindow.Duration == time.Hour && c.Health.FatalRecovery == config.RecoverOnReset
		}},
		{"health", "health:\n  flapThreshold: 2\n  flapWindow: 30m\n  fatalRecovery: operator\n", nil, func(c config.Config) bool {
			return c.Health.FlapThreshold == 2 && c.Health.FlapWindow.Duration == 30*time.Minute && c.Health.FatalRecovery == config.RecoverByOperator &&
				c.Health.RecoverAfter.Duration == 5*time.Minute
		}},
		{"bad health", "health:\n  flapThreshold: 0\n  flapWindow: 1m\n  fatalRecovery: timer\n",
			[]string{"health.flapThreshold", "health.flapWindow: Invalid value: \"1m0s\": must be at least recoverAfter", `health.fatalRecovery: Unsupported value: "timer"`}, nil},
		// Ignored wins when both lists hold an Xid: 79 (off the bus) would
		// never taint.
		{"xid ignored and fatal", "health:\n  ignoredXids: [13, 79]\n  fatalXids: [79]\n", []string{"health.fatalXids[0]: Invalid value: 79: is in ignoredXids too"}, nil},
		{"rules", "defaultMode: shared\ngpus:\n- product: A100\n  mode: mig\n- indexes: [7]\n  mode: whole\n", nil, func(c config.Config) bool {
			return c.ModeOf(0, "NVIDIA A100-SXM4-80GB") == config.MIG && c.ModeOf(7, "NVIDIA L40S") == config.Whole && c.ModeOf(1, "NVIDIA L40S") == config.Shared
		}},
		// A product is matched in any case, as people write it.
		{"product in another case", "gpus:\n- product: h100\n  mode: shared\n", nil, func(c config.Config) bool {
			return c.ModeOf(0, "NVIDIA H100 80GB HBM3") == config.Shared && c.ModeOf(0, "NVIDIA A100-SXM4-80GB") == config.Whole
		}},
		{"unknown field", "mode: whole\n", []string{`unknown field "mode"`}, nil},
		{"a key in another case", "defaultMode: shared\nDefaultMode: whole\n", []string{`unknown field "DefaultMode"`}, nil},
		{"bad quantity and duration name their fields", "shared:\n  memoryStep: 1 GiB\nhealth:\n  recoverAfter: 5 min\n  flapThreshhold: 2\n",
			[]string{`shared.memoryStep: Invalid value: "1 GiB": quantities must match`, `health.recoverAfter: Invalid value: "5 min": time: unknown unit`, `health: unknown field "flapThreshhold"`}, nil},
		// The API server refuses the shared GPUs' request policy (min and
		// step memoryStep, default defaultMemory) unless the default is on
		// the steps; the node would publish no device.
		// A share's MPS memory limit is written in MiB.
		{"memory steps not whole MiB", "shared:\n  memoryStep: 1G\n  defaultMemory: 8G\n", []string{`shared.memoryStep: Invalid value: "1G": must be a whole number of MiB`}, nil},
		{"memory off the steps", "shared:\n  memoryStep: 3Gi\n", []string{`shared.defaultMemory: Invalid value: "8Gi": must be a multiple of shared.memoryStep (3Gi)`}, nil},
		{"fractional bytes", "shared:\n  memoryStep: 1500m\n  defaultMemory: 1.5\n", []string{`shared.memoryStep: Invalid value: "1500m": must be a whole number of bytes`, `shared.defaultMemory: Invalid value: "1500m": must be a whole number of bytes`}, nil},
		{"far too much memory", "shared:\n  defaultMemory: 8Ei\n", []string{"shared.defaultMemory: Invalid value", "at most 8Pi"}, nil},
		{"as much memory as allowed", "shared:\n  memoryStep: 8Pi\n  defaultMemory: 8Pi\n", nil, func(c config.Config) bool { return c.Shared.DefaultMemory.String() == "8Pi" }},
		// The decoder would read the first document and drop the rest.
		{"two documents", "driverName: gpu.nvidia.com\n---\ndefaultMode: mig\n", []string{"c.yaml: more than one YAML document"}, nil},
		{"memory on the steps", "shared:\n  memoryStep: 3Gi\n  defaultMemory: 6Gi\n", nil, func(c config.Config) bool { return c.Shared.DefaultMemory.String() == "6Gi" }},
		{"driver name longer than the API allows", "driverName: gpu.a-very-long-subdomain-that-the-api-server-refuses.example.com\n",
			[]string{"driverName: Too long: may not be more than 63 bytes"}, nil},
		{"bad values", "driverName: GPU_NVIDIA\ndefaultMode: all\ngpus:\n- mode: mig\n- indexes: [-1]\n  mode: whole\nshared:\n  defaultComputePercent: 0\nhealth:\n  recoverAfter: 0s\n",
			[]string{"driverName", "defaultMode", "gpus[0]", "gpus[1].indexes[0]", "shared.defaultComputePercent", "health.recoverAfter"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.body != "" {
				path = filepath.Join(t.TempDir(), "c.yaml")
				if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := config.Load(path)
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to name %q", err, w)
				}
			}
			if tc.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("config %+v", c)
			}
		})
	}
	if _, err := config.Load("/nonexistent/c.yaml"); err == nil {
		t.Error("missing file: no error")
	}
}
