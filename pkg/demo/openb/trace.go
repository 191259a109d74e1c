package openb

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// Node is one GPU node of the trace's cluster.
type Node struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	Model     string // "" for CPU-only nodes
}

// Pod is one pod of a trace. Only the fields that constrain placement are
// kept: the trace's times and phases are meaningless to the artifact's
// methodology, which never deletes pods.
type Pod struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	NumGPU    int
	GPUMilli  int64
	GPUSpec   []string // allowed GPU models; empty means any
}

// GPUMilliRequest is what the pod asks in milli-GPU: NumGPU*1000 for whole
// GPUs, GPUMilli for a share of one GPU, 0 for a CPU-only pod.
func (p Pod) GPUMilliRequest() int64 {
	switch {
	case p.NumGPU == 0:
		return 0
	case p.Share():
		return p.GPUMilli
	default:
		return int64(p.NumGPU) * 1000
	}
}

// Share reports whether the pod asks for a fraction of a single GPU.
func (p Pod) Share() bool { return p.NumGPU == 1 && p.GPUMilli > 0 && p.GPUMilli < 1000 }

// NodeFile is the node list of the GPU nodes (the one the paper schedules on).
const NodeFile = "openb_node_list_gpu_node.csv"

// PodFile names a trace's pod list: "default" -> openb_pod_list_default.csv.
func PodFile(trace string) string { return "openb_pod_list_" + trace + ".csv" }

// LoadNodes reads the GPU node list (NodeFile, or NodeFile.gz) from
// trace: Embedded(), or os.DirFS of a folder with the original files.
func LoadNodes(trace fs.FS) ([]Node, error) {
	f, err := openFile(trace, NodeFile)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: the read's error is the one that counts
	nodes, err := ReadNodes(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", NodeFile, err)
	}
	if CapacityMilli(nodes) == 0 {
		return nil, fmt.Errorf("%s: no node with a GPU", NodeFile)
	}
	return nodes, nil
}

// LoadPods reads the pod list of one trace variant ("default",
// "gpushare40", ...) from trace, as LoadNodes reads the node list.
func LoadPods(trace fs.FS, variant string) ([]Pod, error) {
	// The name becomes part of a path: refuse anything that could leave
	// the folder.
	if variant == "" || strings.ContainsAny(variant, `/\`) || strings.Contains(variant, "..") {
		return nil, fmt.Errorf("openb: invalid trace name %q", variant)
	}
	f, err := openFile(trace, PodFile(variant))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("openb: no trace %q (%w); traces there: %s", variant, err, strings.Join(Traces(trace), ", "))
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only, as in LoadNodes
	pods, err := ReadPods(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PodFile(variant), err)
	}
	return pods, nil
}

// Traces lists the trace variants whose pod lists trace holds, plain or
// compressed, sorted; none when it cannot be read.
func Traces(trace fs.FS) []string {
	entries, err := fs.ReadDir(trace, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".gz")
		variant, ok := strings.CutPrefix(strings.TrimSuffix(name, ".csv"), "openb_pod_list_")
		if ok && strings.HasSuffix(name, ".csv") && !slices.Contains(names, variant) {
			names = append(names, variant)
		}
	}
	slices.Sort(names)
	return names
}

// CheckTraces refuses a trace named twice or whose pod list trace does
// not hold.
func CheckTraces(trace fs.FS, names []string) error {
	there := Traces(trace)
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			return fmt.Errorf("trace %q named twice", name)
		}
		if !slices.Contains(there, name) {
			return fmt.Errorf("no trace %q (want one of %s)", name, strings.Join(there, ", "))
		}
	}
	return nil
}

// ReadNodes parses a node list. Columns are found by header name, so their
// order does not matter and extra columns are ignored.
func ReadNodes(r io.Reader) ([]Node, error) {
	t, err := newTable(r, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}, nil)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for t.next() {
		n := Node{
			Name:      t.str("sn"),
			CPUMilli:  t.int("cpu_milli", -1),
			MemoryMiB: t.int("memory_mib", -1),
			GPUs:      int(t.int("gpu", 1024)),
			Model:     t.str("model"),
		}
		if n.Name == "" {
			t.fail("sn", "empty node name")
		}
		if n.GPUs > 0 && n.Model == "" {
			t.fail("model", "GPU node without a model")
		}
		if t.err == nil {
			nodes = append(nodes, n)
		}
	}
	return nodes, t.err
}

// ReadPods parses a pod list. gpu_spec is optional: the multigpu* lists do
// not have it.
func ReadPods(r io.Reader) ([]Pod, error) {
	t, err := newTable(r, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, []string{"gpu_spec"})
	if err != nil {
		return nil, err
	}
	var pods []Pod
	for t.next() {
		p := Pod{
			Name:      t.str("name"),
			CPUMilli:  t.int("cpu_milli", -1),
			MemoryMiB: t.int("memory_mib", -1),
			NumGPU:    int(t.int("num_gpu", 1024)),
			GPUMilli:  t.int("gpu_milli", 1000),
		}
		if spec := t.str("gpu_spec"); spec != "" {
			p.GPUSpec = strings.Split(spec, "|")
		}
		if p.Name == "" {
			t.fail("name", "empty pod name")
		}
		// Only the three shapes the README defines have a meaning; anything
		// else would be silently mis-sized by GPUMilliRequest.
		switch {
		case t.err != nil:
		case p.NumGPU == 0 && p.GPUMilli != 0:
			t.fail("gpu_milli", fmt.Sprintf("gpu_milli %d without GPUs", p.GPUMilli))
		case p.NumGPU > 0 && p.GPUMilli == 0:
			t.fail("gpu_milli", "GPU pod with gpu_milli 0")
		case p.NumGPU > 1 && p.GPUMilli != 1000:
			t.fail("gpu_milli", fmt.Sprintf("%d GPUs must be whole (gpu_milli 1000), got %d", p.NumGPU, p.GPUMilli))
		}
		for _, m := range p.GPUSpec {
			if m == "" {
				t.fail("gpu_spec", "empty model in gpu_spec")
			}
		}
		if t.err == nil {
			pods = append(pods, p)
		}
	}
	return pods, t.err
}

// table walks a CSV file by header name and keeps the first error, which
// names the line and column, so that callers read fields without checking
// each one.
type table struct {
	r   *csv.Reader
	col map[string]int
	rec []string
	err error
}

func newTable(r io.Reader, required, optional []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("openb: empty file, want a header line")
	}
	if err != nil {
		return nil, fmt.Errorf("openb: %w", err)
	}
	t := &table{r: cr, col: map[string]int{}}
	known := map[string]bool{}
	for _, c := range append(append([]string{}, required...), optional...) {
		known[c] = true
	}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := t.col[h]; dup && known[h] {
			return nil, fmt.Errorf("openb: line 1, column %d: duplicate column %q", i+1, h)
		}
		t.col[h] = i
	}
	for _, c := range required {
		if _, ok := t.col[c]; !ok {
			return nil, fmt.Errorf("openb: line 1: missing column %q (header %q)", c, strings.Join(header, ","))
		}
	}
	return t, nil
}

func (t *table) next() bool {
	if t.err != nil {
		return false
	}
	rec, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return false
	}
	if err != nil {
		// csv.ParseError already says "record on line N" and the column.
		t.err = fmt.Errorf("openb: %w", err)
		return false
	}
	t.rec = rec
	return true
}

func (t *table) str(name string) string {
	i, ok := t.col[name]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

// int parses a non-negative integer no larger than limit (limit < 0:
// unbounded).
func (t *table) int(name string, limit int64) int64 {
	s := t.str(name)
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		t.fail(name, fmt.Sprintf("invalid integer %q", s))
	case v < 0:
		t.fail(name, fmt.Sprintf("negative value %d", v))
	case limit >= 0 && v > limit:
		t.fail(name, fmt.Sprintf("%d is above %d", v, limit))
	}
	return v
}

func (t *table) fail(name, msg string) {
	if t.err != nil {
		return
	}
	i := t.col[name]
	line, _ := t.r.FieldPos(i)
	t.err = fmt.Errorf("openb: line %d, column %d (%s): %s", line, i+1, name, msg)
}
