package fleet

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/gputopo/gputopo/pkg/controlplane"
	"github.com/gputopo/gputopo/pkg/demo/openb"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// OpenBConfig is how the openb fleet offers its GPUs: every GPU shared,
// pods asking for compute in percent (gpu_milli / 10); a whole-GPU pod
// asks for 100 and so has the GPU to itself. Memory is not asked for:
// a share takes the smallest amount.
func OpenBConfig() config.Config {
	c := config.Default()
	c.DefaultMode = config.Shared
	c.Shared.MemoryStep = resource.MustParse("1Mi")
	c.Shared.DefaultMemory = resource.MustParse("1Mi")
	c.Shared.DefaultComputePercent = 1
	return c
}

// StartOpenB creates the trace's GPU nodes once per copy with their CPU,
// memory and GPU model, and publishes their slices as the node agent lays
// them out (the same builder; 1,213 nodes per copy are published directly
// rather than through 2,426 agent processes' gRPC servers).
func StartOpenB(ctx context.Context, client kubernetes.Interface, nodes []openb.Node, copies []string) ([]Node, error) {
	var out []Node
	type job struct {
		copy string
		n    openb.Node
	}
	var jobs []job
	for _, cp := range copies {
		for _, n := range nodes {
			jobs = append(jobs, job{cp, n})
			out = append(out, Node{Name: cp + "-" + n.Name, Copy: cp, Group: n.Model, Mode: config.Shared})
		}
	}
	errs := make([]error, len(jobs))
	workqueue.ParallelizeUntil(ctx, 16, len(jobs), func(i int) {
		j := jobs[i]
		name := j.copy + "-" + j.n.Name
		labels := map[string]string{CopyLabel: j.copy, ShapeLabel: "openb", ModelLabel: j.n.Model}
		if err := controlplane.CreateNode(ctx, client, name, labels, *resource.NewMilliQuantity(j.n.CPUMilli, resource.DecimalSI), *resource.NewQuantity(j.n.MemoryMiB*1024*1024, resource.BinarySI)); err != nil {
			errs[i] = err
			return
		}
		errs[i] = publish(ctx, client, name, j.n)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func publish(ctx context.Context, client kubernetes.Interface, node string, n openb.Node) error {
	gpus := make([]discovery.GPU, n.GPUs)
	for i := range gpus {
		gpus[i] = discovery.GPU{Index: i, Minor: i, UUID: fmt.Sprintf("GPU-%s-%d", node, i), Product: n.Model,
			MemoryMiB: 16384, NUMANode: -1, PCIBusID: fmt.Sprintf("0000:%02x:00.0", i)}
	}
	layout, err := resources.NewLayout(node, gpus, OpenBConfig())
	if err != nil {
		return err
	}
	for _, slice := range layout.ResourceSlices() {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("slice of %s: %w", node, err)
		}
	}
	return nil
}
