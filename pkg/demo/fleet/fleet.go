// Package fleet creates the demo's simulated GPU nodes: Node objects and
// their ResourceSlices, published by gputopo's node agents in mock mode
// (go-nvml's mock servers), once per scheduler so that each scheduler gets
// an identical copy of the fleet to itself.
package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/controlplane"
	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/strictyaml"
)

// Labels on every demo node.
const (
	CopyLabel  = "gputopo.io/copy"
	ShapeLabel = "gputopo.io/shape"
	ModelLabel = "gputopo.io/gpu-model"
	// RackLabel: the rack (rack: in the fleet file) of a GB200 tray.
	RackLabel = "gputopo.io/rack"
)

// Cluster is the fleet file: groups of identical nodes.
type Cluster struct {
	Nodes []NodeGroup `json:"nodes"`
}

// NodeGroup is count nodes of one mock shape.
type NodeGroup struct {
	// Name prefixes the nodes' names: <copy>-<name>-<i>.
	Name  string         `json:"name"`
	Count int            `json:"count"`
	Shape mocknvml.Shape `json:"shape"`
	// Mode offers the GPUs whole, as MIG partitions or shared.
	Mode config.Mode `json:"mode"`
	// Rack groups GB200 trays into one NVLink clique.
	Rack   string            `json:"rack,omitempty"`
	CPU    resource.Quantity `json:"cpu,omitempty"`
	Memory resource.Quantity `json:"memory,omitempty"`
}

// AgentMode is the mode the group's node agents run in: Mode, whole by
// default.
func (g NodeGroup) AgentMode() config.Mode {
	if g.Mode == "" {
		return config.Whole
	}
	return g.Mode
}

// LoadCluster reads and checks a fleet file.
func LoadCluster(path string) (Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Cluster{}, err
	}
	return ParseCluster(data, path)
}

// MaxNodes bounds a fleet file's nodes (each copy holds them all): every
// node's agent runs inside the demo's process.
const MaxNodes = 2000

// ParseCluster checks a fleet file's content; errors name the field.
func ParseCluster(data []byte, source string) (Cluster, error) {
	var c Cluster
	if err := strictyaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", source, err)
	}
	var errs field.ErrorList
	if len(c.Nodes) == 0 {
		errs = append(errs, field.Required(field.NewPath("nodes"), "at least one node group"))
	}
	seen := map[string]bool{}
	total := 0
	for i, g := range c.Nodes {
		p := field.NewPath("nodes").Index(i)
		total += max(g.Count, 0)
		// Node names are <copy>-<name>-<i>, and also the node's
		// kubernetes.io/hostname label: each must be a DNS label.
		for _, msg := range validation.IsDNS1123Label(g.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), g.Name, msg))
		}
		if longest := fmt.Sprintf("%s-%s-%d", strings.Repeat("x", MaxCopyName), g.Name, max(g.Count-1, 0)); len(longest) > validation.DNS1123LabelMaxLength {
			errs = append(errs, field.TooLong(p.Child("name"), g.Name, validation.DNS1123LabelMaxLength-len(longest)+len(g.Name)))
		}
		if seen[g.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), g.Name))
		}
		seen[g.Name] = true
		if g.CPU.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("cpu"), g.CPU.String(), "must not be negative"))
		}
		if g.Memory.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("memory"), g.Memory.String(), "must not be negative"))
		}
		if g.Count < 1 || g.Count > MaxNodes {
			errs = append(errs, field.Invalid(p.Child("count"), g.Count, fmt.Sprintf("must be in 1..%d", MaxNodes)))
		}
		if _, err := mocknvml.ParseShape(string(g.Shape)); err != nil {
			errs = append(errs, field.NotSupported(p.Child("shape"), g.Shape, shapeNames()))
		}
		// The rack is a node label's value.
		for _, msg := range validation.IsValidLabelValue(g.Rack) {
			errs = append(errs, field.Invalid(p.Child("rack"), g.Rack, msg))
		}
		if g.Rack != "" && g.Shape != mocknvml.GB200Tray {
			errs = append(errs, field.Invalid(p.Child("rack"), g.Rack, "only "+string(mocknvml.GB200Tray)+" nodes are in a rack's NVLink clique"))
		}
		switch g.Mode {
		case config.Whole, config.MIG, config.Shared, "":
		default:
			errs = append(errs, field.NotSupported(p.Child("mode"), g.Mode, []config.Mode{config.Whole, config.MIG, config.Shared}))
		}
	}
	if total > MaxNodes {
		errs = append(errs, field.Invalid(field.NewPath("nodes"), total, fmt.Sprintf("%d nodes in all; at most %d: the demo runs a node agent per node inside its own process", total, MaxNodes)))
	}
	if err := errs.ToAggregate(); err != nil {
		return c, fmt.Errorf("%s: %w", source, err)
	}
	return c, nil
}

func shapeNames() []string {
	var out []string
	for _, s := range mocknvml.Shapes {
		out = append(out, string(s))
	}
	return out
}

// Node is one created node.
type Node struct {
	Name, Copy, Group string
	Shape             mocknvml.Shape
	Mode              config.Mode
}

// Fleet is the running fleet: nodes and their agents.
type Fleet struct {
	Nodes  []Node
	agents []*agent.Agent
}

// Stop stops the agents.
func (f *Fleet) Stop() {
	for _, a := range f.agents {
		a.Stop()
	}
}

// MaxCopyName is the longest copy name Start takes ("gputopo", "intree"):
// ParseCluster checks node names against it.
const MaxCopyName = 7

// Start creates every node of the cluster once per copy and starts its
// node agent in mock mode; the agents publish the slices.
func Start(ctx context.Context, client kubernetes.Interface, c Cluster, copies []string, dir string) (*Fleet, error) {
	f := &Fleet{}
	// Checked before any node is created.
	for _, cp := range copies {
		if len(cp) > MaxCopyName {
			return nil, fmt.Errorf("copy name %q: longer than %d characters", cp, MaxCopyName)
		}
	}
	for _, cp := range copies {
		for _, g := range c.Nodes {
			for i := range g.Count {
				n := Node{Name: fmt.Sprintf("%s-%s-%d", cp, g.Name, i), Copy: cp, Group: g.Name, Shape: g.Shape, Mode: g.AgentMode()}
				labels := map[string]string{CopyLabel: cp, ShapeLabel: string(g.Shape)}
				if g.Rack != "" {
					labels[RackLabel] = g.Rack
				}
				if err := controlplane.CreateNode(ctx, client, n.Name, labels, g.CPU, g.Memory); err != nil {
					f.Stop()
					return nil, err
				}
				// Directories by index, not name: the agent's sockets
				// must fit a Unix socket path (108 bytes) whatever the
				// node's name.
				a, err := startAgent(ctx, client, n, cp+"-"+g.Rack, filepath.Join(dir, strconv.Itoa(len(f.Nodes))))
				if err != nil {
					f.Stop()
					return nil, err
				}
				f.agents = append(f.agents, a)
				f.Nodes = append(f.Nodes, n)
			}
		}
	}
	return f, nil
}

func startAgent(ctx context.Context, client kubernetes.Interface, n Node, rack, dir string) (*agent.Agent, error) {
	lib, err := mocknvml.NewWith(n.Shape, mocknvml.Options{Name: n.Name, Rack: rack, MIG: n.Mode == config.MIG})
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.DefaultMode = n.Mode
	// As manifests/nodeagent-clique-label: GB200 trays labeled with their
	// clique, for the in-tree TopologyPlacementGenerator.
	cfg.CliqueLabel = true
	a, err := agent.Start(ctx, agent.Options{
		NodeName: n.Name, Config: cfg, NVML: lib, KubeClient: client,
		PluginDir: filepath.Join(dir, "plugin"), RegistrarDir: filepath.Join(dir, "registry"), CDIDir: filepath.Join(dir, "cdi"),
	})
	if err != nil {
		return nil, fmt.Errorf("node agent of %s: %w", n.Name, err)
	}
	return a, nil
}
