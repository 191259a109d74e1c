package perf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// fleetShape is a node shape of our workloads: a mock node as the node
// agent lays it out.
type fleetShape struct {
	name  string // file and node name prefix
	shape mocknvml.Shape
	mode  config.Mode
	// traysPerClique: node i is in clique nvl72-<i/traysPerClique>
	// (attribute and node label); 0 for shapes without one.
	traysPerClique int
}

var fleetShapes = []fleetShape{
	{"dgxh100", mocknvml.DGXH100, config.Whole, 0},
	{"pcie-pairs", mocknvml.PCIePairs, config.Whole, 0},
	{"dgxa100-mig", mocknvml.DGXA100, config.MIG, 0},
	{"dgxh100-shared", mocknvml.DGXH100, config.Shared, 0},
	{"gb200", mocknvml.GB200Tray, config.Whole, 18},
}

// The placeholder the agent's layout is built for; in the templates it
// becomes the node of the harness's index.
const nodePlaceholder = "nodeplaceholder"

// writeFleet writes, per shape, a node template and one ResourceSlice
// template per slice of the agent's pool (fleet/<shape>-node.yaml,
// fleet/<shape>-slice-<i>.yaml): the harness creates node i and its
// slices with {{.Index}} = i.
func writeFleet(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "fleet"), 0o750); err != nil {
		return err
	}
	for _, fs := range fleetShapes {
		lib, err := mocknvml.NewWith(fs.shape, mocknvml.Options{Name: nodePlaceholder, MIG: fs.mode == config.MIG, Rack: "rack"})
		if err != nil {
			return err
		}
		gpus, err := discovery.Discover(lib, discovery.Options{PCIeRoot: func(bus string) (string, error) { return "pci" + bus[:7], nil }})
		if err != nil {
			return err
		}
		cfg := config.Default()
		cfg.DefaultMode = fs.mode
		layout, err := resources.NewLayout(nodePlaceholder, gpus, cfg)
		if err != nil {
			return err
		}
		node := fs.name + "-{{.Index}}"
		// Per node unique GPU UUIDs: the first UUID group becomes the index.
		var uuids, cliques []string
		for _, g := range gpus {
			uuids = append(uuids, g.UUID)
			if g.CliqueID != "" {
				cliques = append(cliques, g.CliqueID)
			}
		}
		clique := fmt.Sprintf("nvl72-{{DivideInt .Index %d}}", fs.traysPerClique)
		fill := func(text string) string {
			for _, u := range uuids {
				text = strings.ReplaceAll(text, u, "GPU-{{printf \"%08d\" .Index}}"+u[len("GPU-")+8:])
			}
			for _, c := range cliques {
				text = strings.ReplaceAll(text, c, clique)
			}
			return strings.ReplaceAll(text, nodePlaceholder, node)
		}
		labels := fmt.Sprintf("    gputopo.io/shape: %s\n", fs.name)
		if fs.traysPerClique > 0 {
			// For the in-tree TopologyPlacementGenerator, which reads
			// only node labels (manifests/nodeagent-clique-label).
			labels += fmt.Sprintf("    %s: %s\n", contract.LabelClique, clique)
		}
		nodeYAML := fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  labels:
%sspec: {}
status:
  capacity: {pods: "110", cpu: "128", memory: 1Ti}
  allocatable: {pods: "110", cpu: "128", memory: 1Ti}
  conditions:
  - {status: "True", type: Ready}
  phase: Running
`, node, labels)
		if err := os.WriteFile(filepath.Join(dir, "fleet", fs.name+"-node.yaml"), []byte(nodeYAML), 0o640); err != nil {
			return err
		}
		for i, slice := range layout.ResourceSlices() {
			out, err := yaml.Marshal(slice)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "fleet", fmt.Sprintf("%s-slice-%d.yaml", fs.name, i)), []byte(fill(string(out))), 0o640); err != nil {
				return err
			}
		}
	}
	return nil
}
