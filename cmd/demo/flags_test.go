package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario=trace"}, `--scenario="trace"`},
		{[]string{"--scenario=openb", "--until=0"}, "--until=0: want a percentage of the GPU capacity in (0, 130]"},
		{[]string{"--scenario=openb", "--until=131"}, "--until=131"},
		{[]string{"--scenario=openb", "--nodes=-1"}, "--nodes=-1"},
		{[]string{"--scenario=openb-table", "--nodes=5000"}, "--nodes=5000: the trace has 1213 GPU nodes (0: all of them)"},
		{[]string{"--scenario=openb", "--nodes=1214"}, "--nodes=1214: the trace has 1213 GPU nodes"},
		{[]string{"--scenario=openb-table", "--schedulers=gputopo,kai"}, `--schedulers: "kai" is not a profile the table replays`},
		{[]string{"--scenario=openb-table", "--schedulers="}, `--schedulers: "" is not a profile`},
		{[]string{"--scenario=openb-table", "--schedulers=in"}, `--schedulers: "in" is not a profile`},
		{[]string{"--scenario=openb-table", "--schedulers=gputopo,gputopo"}, `--schedulers: "gputopo" named twice`},
		{[]string{"--scenario=churn", "--streams=nvlink-pairs,dgx"}, `--streams: no churn stream "dgx" (want one of nvlink-pairs, nvswitch, gb200, mig-a100, mig-h100, shared)`},
		{[]string{"--scenario=churn", "--streams=shared,shared"}, `--streams: churn stream "shared" named twice`},
		{[]string{"churn", "--seeds=3"}, `unexpected argument "churn"`},
		{[]string{"--quiet", "false", "--scenario=churn"}, `unexpected argument "false"`},
		{[]string{"--scenario=churn", "--seeds=99999999999"}, "--seeds=99999999999: want 1 to 1000"},
		{[]string{"--scenario=churn", "--parallel=400000"}, "--parallel=400000: want 1 to 256"},
		{[]string{"--scenario=churn", "--parallel=0"}, "--parallel=0: want 1 to 256"},
		{[]string{"--scenario=churn", "--seed=18446744073709551615", "--seeds=2"}, "the last seed would pass"},
		{[]string{"--scenario=openb", "--until=NaN"}, "--until=NaN"},
		{[]string{"--scenario=churn", "--kubeconfig=kc.yaml"}, "--kubeconfig applies to --scenario=default, nvl72, not churn"},
		{[]string{"--scenario=churn", "--cluster=fleet.yaml"}, "--cluster applies to --scenario=default, nvl72, not churn"},
		{[]string{"--scenario=openb-table", "--until=50"}, "--until applies to --scenario=openb, not openb-table"},
		{[]string{"--scenario=openb", "--traces=default"}, "--traces applies to --scenario=openb-table, not openb"},
		{[]string{"--nodes=10"}, "--nodes applies to --scenario=openb, openb-table, not default"},
		{[]string{"--cluster=fleet.yaml", "--kubeconfig=kc.yaml"}, "--cluster builds a simulated fleet; --kubeconfig replays on the cluster's own nodes"},
		{[]string{"--scenario=openb", "--streams=x"}, "--streams applies to --scenario=churn, not openb"},
		{[]string{"--scenario=openb-table", "--traces=default,default"}, `--traces: trace "default" named twice`},
		{[]string{"--scenario=openb-table", "--traces=default, gpushare40"}, `--traces: no trace " gpushare40" (want one of cpu0,`},
		{[]string{"--scenario=openb", "--trace=gpushare4"}, `--trace: no trace "gpushare4"`},
	} {
		_, err := parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	empty := t.TempDir()
	if _, err := parse([]string{"--scenario=openb", "--openb-dir=" + empty}); err == nil ||
		!strings.Contains(err.Error(), "--openb-dir="+empty+": open openb_node_list_gpu_node.csv") {
		t.Errorf("--openb-dir without a node list: error %v, want it to name the folder and the file", err)
	}
	if err := os.WriteFile(filepath.Join(empty, "openb_node_list_gpu_node.csv"), []byte("sn,cpu_milli,memory_mib,gpu,model\ncpu-0,1000,1024,0,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parse([]string{"--scenario=openb", "--openb-dir=" + empty}); err == nil || !strings.Contains(err.Error(), "no node with a GPU") {
		t.Errorf("--openb-dir with CPU nodes only: error %v, want no node with a GPU", err)
	}
	if _, err := parse([]string{"--scenario=openb", "--seed=18446744073709551615"}); err != nil {
		t.Errorf("--scenario=openb reads no --seeds, so any --seed goes: %v", err)
	}
	f, err := parse([]string{"--scenario=openb", "--until=120", "--nodes=150"})
	if err != nil || f.until != 120 || f.nodes != 150 {
		t.Errorf("valid flags: %+v, %v", f, err)
	}
	f, err = parse([]string{"--scenario=churn", "--streams=gb200,shared", "--seeds=3"})
	if err != nil || strings.Join(f.streams, ",") != "gb200,shared" || f.seeds != 3 {
		t.Errorf("valid churn flags: %+v, %v", f, err)
	}
	f, err = parse([]string{"--scenario=openb-table", "--seed=4", "--seeds=7"})
	if got := seedList(f.seed, f.seeds); err != nil || len(got) != 7 || got[0] != 4 || got[6] != 10 {
		t.Errorf("--seed=4 --seeds=7: seeds %v, %v; want 4..10", got, err)
	}
	f, err = parse([]string{"--scenario=openb-table", "--schedulers=in-tree"})
	if err != nil {
		t.Fatal(err)
	}
	if chosen, err := tableTargets(f.schedulers); err != nil || len(chosen) != 1 || chosen[0].SchedulerName != "default-scheduler" {
		t.Errorf("--schedulers=in-tree: targets %+v, %v; want the default-scheduler profile only", chosen, err)
	}
}

// churnWithConfig writes cfg to a file and parses the churn scenario's
// flags with --scheduler-config naming it, and args.
func churnWithConfig(t *testing.T, cfg string, args ...string) (string, flags) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := parse(append([]string{"--scenario=churn", "--scheduler-config=" + path}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return path, f
}

// A --scheduler-config without a profile that --schedulers replays is
// refused before anything runs, naming the file and the profile.
func TestSchedulerConfigMustHaveTheReplayedProfiles(t *testing.T) {
	path, f := churnWithConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gputopo-scheduler
`)
	_, _, err := inProcessProfiles(t.Context(), f)
	want := "--scheduler-config=" + path + ": no profile with schedulerName default-scheduler"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("both profiles from a file with one: error %v, want one containing %q", err, want)
	}
	f.schedulers = []string{"gputopo"}
	if _, chosen, err := inProcessProfiles(t.Context(), f); err != nil || len(chosen) != 1 {
		t.Errorf("--schedulers=gputopo from a file with its profile: %v, %v", chosen, err)
	}
}

// A plugin name the scheduler does not know fails before the first
// replay, naming the file.
func TestSchedulerConfigWithAnUnknownPluginFailsAtOnce(t *testing.T) {
	path, f := churnWithConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gputopo-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopologyy
`, "--schedulers=gputopo")
	_, _, err := inProcessProfiles(t.Context(), f)
	for _, want := range []string{"--scheduler-config=" + path, `"GPUTopologyy" does not exist`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
}

// Args for a plugin the scheduler does not have, and a number that is
// not finite, fail before the first replay, naming the file and field.
func TestSchedulerConfigArgsThatWouldBeIgnoredFailAtOnce(t *testing.T) {
	for value, want := range map[string]string{
		"name: GPUTopolgy\n    args: {linkClassCost: 2}":     `pluginConfig[0].name: Invalid value: "GPUTopolgy"`,
		"name: GPUTopology\n    args: {linkClassCost: .nan}": "pluginConfig[0].args.linkClassCost",
	} {
		path, f := churnWithConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gputopo-scheduler
  pluginConfig:
  - `+value+"\n", "--schedulers=gputopo")
		_, _, err := inProcessProfiles(t.Context(), f)
		for _, w := range []string{"--scheduler-config=" + path, want} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v, want one containing %q", err, w)
			}
		}
	}
}

// --out must take files: a path under a regular file is refused before
// anything runs.
func TestOutMustBeAWritableDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := writableDir(filepath.Join(dir, "report")); err != nil {
		t.Errorf("a new directory: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writableDir(filepath.Join(file, "report")); err == nil {
		t.Error("a directory under a regular file: no error")
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "report")); len(entries) != 0 {
		t.Errorf("the write check left %d files behind", len(entries))
	}
}

// A file that cannot be read is reported with the flag that named it.
func TestFileErrorsNameTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := clusterOf(flags{cluster: missing}); err == nil || !strings.HasPrefix(err.Error(), "--cluster: open "+missing) {
		t.Errorf("--cluster of a missing file: %v", err)
	}
	if _, err := workload(flags{workload: missing}); err == nil || !strings.HasPrefix(err.Error(), "--workload: open "+missing) {
		t.Errorf("--workload of a missing file: %v", err)
	}
}
