package fleet

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/controlplane"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// MockNode is a node PublishMock created.
type MockNode struct {
	Name string
	// GPUs is how many physical GPUs the node has, whatever its mode.
	GPUs   int
	Slices []*resourceapi.ResourceSlice
}

// PublishMock creates node name of g's shape and mode and publishes its
// ResourceSlices as the node agent in mock mode lays them out (the same
// discovery and layout), without running the agent: in-process replays
// need the slices, not the kubelet plugin or CDI. rack names the GB200
// clique.
func PublishMock(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string, g NodeGroup, rack string) (MockNode, error) {
	mode := g.AgentMode()
	lib, err := mocknvml.NewWith(g.Shape, mocknvml.Options{Name: name, Rack: rack, MIG: mode == config.MIG})
	if err != nil {
		return MockNode{}, err
	}
	gpus, err := discovery.Discover(lib, discovery.Options{})
	if err != nil {
		return MockNode{}, fmt.Errorf("node %s: %w", name, err)
	}
	cfg := config.Default()
	cfg.DefaultMode = mode
	layout, err := resources.NewLayout(name, gpus, cfg)
	if err != nil {
		return MockNode{}, fmt.Errorf("node %s: %w", name, err)
	}
	if err := controlplane.CreateNode(ctx, client, name, labels, g.CPU, g.Memory); err != nil {
		return MockNode{}, err
	}
	out := MockNode{Name: name, GPUs: len(gpus)}
	for _, s := range layout.ResourceSlices() {
		created, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return MockNode{}, fmt.Errorf("slice of %s: %w", name, err)
		}
		out.Slices = append(out.Slices, created)
	}
	return out, nil
}
