package openb

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadRealTrace(t *testing.T) {
	dir := traceFS(t)
	nodes, err := LoadNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Counts from the trace's README.
	byGPUs := map[int]int{}
	gpusByModel := map[string]int{}
	total := 0
	for _, n := range nodes {
		byGPUs[n.GPUs]++
		gpusByModel[n.Model] += n.GPUs
		total += n.GPUs
	}
	if len(nodes) != 1213 || total != 6212 || CapacityMilli(nodes) != 6_212_000 {
		t.Errorf("nodes = %d, GPUs = %d, capacity = %d; want 1213, 6212, 6212000", len(nodes), total, CapacityMilli(nodes))
	}
	if want := map[int]int{8: 617, 2: 518, 4: 54, 1: 24}; !maps.Equal(byGPUs, want) {
		t.Errorf("nodes by GPU count = %v, want %v", byGPUs, want)
	}
	if gpusByModel["G2"] != 4392 || len(gpusByModel) != 7 {
		t.Errorf("GPUs by model = %v, want 7 models and G2 = 4392", gpusByModel)
	}

	tests := []struct {
		trace                   string
		pods, cpu, whole, share int
		withSpec                int // -1: not checked
	}{
		{"default", 8152, 1088, 3986, 3078, -1},
		{"gpushare100", 8152, 1088, 0, 7064, -1},
		{"multigpu50", 9061, 1088, 4895, 3078, 0}, // no gpu_spec column at all
		{"cpu250", 9420, 2356, 3986, 3078, -1},
		{"gpuspec33", 8152, 1088, 3986, 3078, 8152 - 5764},
	}
	for _, tc := range tests {
		t.Run(tc.trace, func(t *testing.T) {
			pods, err := LoadPods(dir, tc.trace)
			if err != nil {
				t.Fatal(err)
			}
			var cpu, whole, share, spec int
			var minShare, maxShare int64 = 1000, 0
			for _, p := range pods {
				switch {
				case p.NumGPU == 0:
					cpu++
				case p.Share():
					share++
					minShare, maxShare = min(minShare, p.GPUMilli), max(maxShare, p.GPUMilli)
				default:
					whole++
				}
				if len(p.GPUSpec) > 0 {
					spec++
				}
			}
			if len(pods) != tc.pods || cpu != tc.cpu || whole != tc.whole || share != tc.share {
				t.Errorf("pods = %d (cpu %d, whole %d, share %d), want %d (%d, %d, %d)",
					len(pods), cpu, whole, share, tc.pods, tc.cpu, tc.whole, tc.share)
			}
			if tc.withSpec >= 0 && spec != tc.withSpec {
				t.Errorf("pods with gpu_spec = %d, want %d", spec, tc.withSpec)
			}
			if tc.trace == "default" && (minShare != 50 || maxShare != 810) {
				t.Errorf("share gpu_milli range = %d..%d, want 50..810 (README)", minShare, maxShare)
			}
		})
	}
}

func TestGPUMilliRequest(t *testing.T) {
	tests := []struct {
		name  string
		pod   Pod
		want  int64
		share bool
	}{
		{"cpu only", Pod{NumGPU: 0, GPUMilli: 0}, 0, false},
		{"one whole GPU", Pod{NumGPU: 1, GPUMilli: 1000}, 1000, false},
		{"eight whole GPUs", Pod{NumGPU: 8, GPUMilli: 1000}, 8000, false},
		{"share", Pod{NumGPU: 1, GPUMilli: 460}, 460, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pod.GPUMilliRequest(); got != tc.want {
				t.Errorf("GPUMilliRequest = %d, want %d", got, tc.want)
			}
			if got := tc.pod.Share(); got != tc.share {
				t.Errorf("Share = %v, want %v", got, tc.share)
			}
		})
	}
}

func TestReadPodsColumnOrderAndSpec(t *testing.T) {
	// Columns shuffled, an unknown column, a BOM, and spaces around names.
	in := "\ufeffgpu_spec, Name ,extra,gpu_milli,num_gpu,memory_mib,cpu_milli\n" +
		"V100M16|V100M32,p0,x,1000,2,1024,4000\n" +
		",p1,y,250,1,512,1000\n"
	pods, err := ReadPods(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Pod{
		{Name: "p0", CPUMilli: 4000, MemoryMiB: 1024, NumGPU: 2, GPUMilli: 1000, GPUSpec: []string{"V100M16", "V100M32"}},
		{Name: "p1", CPUMilli: 1000, MemoryMiB: 512, NumGPU: 1, GPUMilli: 250},
	}
	if !slices.EqualFunc(pods, want, podEqual) {
		t.Errorf("ReadPods = %+v, want %+v", pods, want)
	}
}

func TestReadErrorsNameLineAndColumn(t *testing.T) {
	const nodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n"
	const podHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	tests := []struct {
		name  string
		pods  bool
		in    string
		wants []string // substrings of the error
	}{
		{"empty file", false, "", []string{"empty file"}},
		{"missing column", false, "sn,cpu_milli,memory_mib,gpu\n", []string{"line 1", `missing column "model"`}},
		{"duplicate column", true, "name,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", []string{"line 1, column 2", "duplicate"}},
		{"bad integer", false, nodeHeader + "n0,1000,1024,2,T4\nn1,lots,1024,2,T4\n", []string{"line 3, column 2 (cpu_milli)", `"lots"`}},
		{"negative", false, nodeHeader + "n0,1000,-1,2,T4\n", []string{"line 2, column 3 (memory_mib)", "negative"}},
		{"GPU node without model", false, nodeHeader + "n0,1000,1024,2,\n", []string{"line 2, column 5 (model)"}},
		{"empty node name", false, nodeHeader + ",1000,1024,2,T4\n", []string{"line 2, column 1 (sn)"}},
		{"wrong field count", false, nodeHeader + "n0,1000,1024,2\n", []string{"line 2", "wrong number of fields"}},
		{"bare quote", true, podHeader + "p\"0,1,1,0,0,\n", []string{"line 2", "column"}},
		{"share of several GPUs", true, podHeader + "p0,1,1,1,1000,\np1,1,1,2,500,\n", []string{"line 3, column 5 (gpu_milli)", "whole"}},
		{"milli without GPU", true, podHeader + "p0,1,1,0,300,\n", []string{"line 2, column 5 (gpu_milli)"}},
		{"GPU pod asking nothing", true, podHeader + "p0,1,1,1,0,\n", []string{"line 2, column 5 (gpu_milli)"}},
		{"milli above 1000", true, podHeader + "p0,1,1,1,1500,\n", []string{"line 2, column 5 (gpu_milli)", "above 1000"}},
		{"empty spec model", true, podHeader + "p0,1,1,1,1000,T4|\n", []string{"line 2, column 6 (gpu_spec)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.pods {
				_, err = ReadPods(strings.NewReader(tc.in))
			} else {
				_, err = ReadNodes(strings.NewReader(tc.in))
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadPodsRejectsPathsAndNamesFile(t *testing.T) {
	dir := os.DirFS(t.TempDir())
	for _, trace := range []string{"", "../default", "a/b", `a\b`} {
		if _, err := LoadPods(dir, trace); err == nil || !strings.Contains(err.Error(), "invalid trace name") {
			t.Errorf("LoadPods(%q) error = %v, want invalid trace name", trace, err)
		}
	}
	if _, err := LoadPods(dir, "nosuch"); err == nil || !strings.Contains(err.Error(), "openb_pod_list_nosuch.csv") {
		t.Errorf("LoadPods(nosuch) error = %v, want it to name the file", err)
	}
}

// A trace that is not there is named with the ones that are, plain and
// compressed alike, each once.
func TestLoadPodsNamesTheTracesThere(t *testing.T) {
	tmp := t.TempDir()
	for _, name := range []string{"openb_pod_list_b.csv", "openb_pod_list_a.csv.gz", "openb_pod_list_b.csv.gz", NodeFile, "openb_pod_list_c.txt"} {
		if err := os.WriteFile(filepath.Join(tmp, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadPods(os.DirFS(tmp), "gpushare4")
	if err == nil || !strings.Contains(err.Error(), `no trace "gpushare4"`) || !strings.HasSuffix(err.Error(), "traces there: a, b") {
		t.Errorf("LoadPods(gpushare4) error = %v, want it to name the trace and list a, b", err)
	}
	if got := Traces(Embedded()); len(got) != 24 || !slices.Contains(got, "default") || !slices.Contains(got, "cpu250") {
		t.Errorf("Traces(Embedded()) = %v, want the 24 shipped pod lists", got)
	}
}

func podEqual(a, b Pod) bool {
	return a.Name == b.Name && a.CPUMilli == b.CPUMilli && a.MemoryMiB == b.MemoryMiB &&
		a.NumGPU == b.NumGPU && a.GPUMilli == b.GPUMilli && slices.Equal(a.GPUSpec, b.GPUSpec)
}
