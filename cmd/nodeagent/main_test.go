package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/version"
)

// Errors a platform engineer meets first say what to fix.
func TestStartupErrors(t *testing.T) {
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badConfig, []byte("defaultMode: partitioned\ngpus:\n- mode: mig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--kubeconfig", kubeconfig, "--plugin-dir", filepath.Join(dir, "p"), "--registrar-dir", filepath.Join(dir, "r"), "--cdi-dir", filepath.Join(dir, "cdi")}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--nvml", "mock:dgxa100"}, []string{"--node-name"}},
		{[]string{"--node-name", "n", "--nvml", "mock:dgx9000"}, []string{`unknown mock shape "dgx9000"`, "dgxh100"}},
		{[]string{"--node-name", "n", "--nvml", "cuda"}, []string{`--nvml="cuda"`}},
		{[]string{"--node-name", "n", "--config", badConfig}, []string{"defaultMode", "partitioned", "gpus[0]"}},
		// No NVIDIA driver on this machine: the real library is absent.
		{append([]string{"--node-name", "n", "--nvml", "real"}, common...), []string{"NVML not available"}},
		{[]string{"--node-name", "n", "--health-probe-interval", "0s"}, []string{"--health-probe-interval=0s", "at least 100ms"}},
		{[]string{"--node-name", "n", "--health-probe-interval=1ns"}, []string{"--health-probe-interval=1ns", "at least 100ms"}},
		{[]string{"--node-name", "n", "--nvml", "mock:dgxh100", "--mock-rack", "rack-a"}, []string{"--mock-rack", "gb200-tray"}},
		{[]string{"--node-name", "n", "--mock-mig"}, []string{"--mock-mig", "--nvml=real"}},
		{[]string{"--node-name", "n", "--mock-faults=/tmp/faults"}, []string{"--mock-faults", "--nvml=real"}},
		{[]string{"--node-name=n", "--nvml=mock:dgxh100", "--mock-mig", "false", "--config=" + badConfig}, []string{`unexpected argument "false"`, "--name=value"}},
		{[]string{"--node-name", "n", "--nvml", "mock:dgxh100", "--kubeconfig", kubeconfig, "--plugin-dir", filepath.Join(badConfig, "p"),
			"--registrar-dir", filepath.Join(dir, "r"), "--cdi-dir", filepath.Join(dir, "cdi")}, []string{"--plugin-dir", "not a directory"}},
		{[]string{"--node-name", "n", "--nvml", "mock:dgxh100", "--kubeconfig", kubeconfig, "--plugin-dir", filepath.Join(dir, "p"),
			"--registrar-dir", filepath.Join(dir, "r"), "--cdi-dir", filepath.Join(badConfig, "cdi")}, []string{"--cdi-dir", "not a directory"}},
		{append([]string{"--node-name", "n", "--nvml", "mock:dgxh100", "--mock-mig=false", "--config", writeConfig(t, dir, "defaultMode: mig\n")}, common...), []string{"GPU 0", "MIG mode is off"}},
	}
	for _, tc := range tests {
		err := run(context.Background(), tc.args)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("run %v: error %v, want it to mention %q", tc.args, err, w)
			}
		}
	}
}

func writeConfig(t *testing.T, dir, body string) string {
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// --help prints the usage and is not a failure.
func TestHelp(t *testing.T) {
	if err := run(context.Background(), []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run --help: %v, want flag.ErrHelp (main exits 0)", err)
	}
}

// --version needs no node name, configuration, NVML or cluster.
func TestVersion(t *testing.T) {
	var b strings.Builder
	stdout = &b
	defer func() { stdout = os.Stdout }()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--nvml", "cuda", "--version"}} {
		b.Reset()
		if err := run(context.Background(), args); err != nil {
			t.Errorf("run %v: %v", args, err)
		}
		if got, want := b.String(), "gputopo-nodeagent "+version.Get()+" ("; !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 {
			t.Errorf("run %v printed %q, want one line starting %q", args, got, want)
		}
	}
	b.Reset()
	if err := run(context.Background(), []string{"--version=raw"}); err != nil {
		t.Errorf("run --version=raw: %v", err)
	}
	if got := b.String(); !strings.HasPrefix(got, "gputopo-nodeagent ") || !strings.Contains(got, "\tCGO_ENABLED=") {
		t.Errorf("--version=raw printed %q, want the line and the build settings", got)
	}
	// --version=false asks for nothing: the agent starts and wants its node.
	b.Reset()
	if err := run(context.Background(), []string{"--version=false"}); err == nil || !strings.Contains(err.Error(), "--node-name") || b.Len() > 0 {
		t.Errorf("run --version=false: printed %q, error %v; want the missing --node-name", b.String(), err)
	}
	if err := run(context.Background(), []string{"--version=yes"}); err == nil || !strings.Contains(err.Error(), "want true, false or raw") {
		t.Errorf("run --version=yes: %v, want the values named", err)
	}
}
