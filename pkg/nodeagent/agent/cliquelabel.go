package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// nodeClique is the clique every GPU of the node belongs to; "" when
// none belongs to one. GPUs of one tray in different cliques are an
// error: the node is in no clique then.
func nodeClique(gpus []discovery.GPU) (string, error) {
	var ids []string
	for _, g := range gpus {
		if g.CliqueID != "" && !slices.Contains(ids, g.CliqueID) {
			ids = append(ids, g.CliqueID)
		}
	}
	switch {
	case len(ids) > 1:
		return "", fmt.Errorf("the node's GPUs are in different NVLink cliques %v", ids)
	case len(ids) == 1 && len(gpus) > 0 && slices.ContainsFunc(gpus, func(g discovery.GPU) bool { return g.CliqueID == "" }):
		return "", fmt.Errorf("some of the node's GPUs are in NVLink clique %s and some in none", ids[0])
	case len(ids) == 1:
		return ids[0], nil
	}
	return "", nil
}

// labelClique sets the node's clique label to the GPUs' clique, or
// removes it when they are in none or disagree (then it returns the
// error too): a stale label would send pod groups to the wrong rack.
func labelClique(ctx context.Context, client kubernetes.Interface, node string, gpus []discovery.GPU) error {
	clique, cliqueErr := nodeClique(gpus)
	var value any // nil removes the label
	if clique != "" {
		value = clique
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{contract.LabelClique: value}}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node agent: label node %s with %s=%q: %w", node, contract.LabelClique, clique, err)
	}
	klog.FromContext(ctx).Info("Node clique label set", "node", node, "label", contract.LabelClique, "clique", clique)
	if cliqueErr != nil {
		return fmt.Errorf("node agent: %s label of node %s %w: %w", contract.LabelClique, node, errLabelRemoved, cliqueErr)
	}
	return nil
}

// errLabelRemoved: the label was written (removed) because the GPUs
// disagree on their clique; writing it again would not help.
var errLabelRemoved = errors.New("removed")
