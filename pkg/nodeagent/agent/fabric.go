package agent

import (
	"context"
	"errors"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// defaultFabricPollInterval is how often a GPU's clique is read again
// while its NVLink fabric is still being set up.
const defaultFabricPollInterval = 10 * time.Second

// awaitCliques reads again the clique of GPUs whose NVLink fabric was
// still being set up when the agent started (the fabric manager starts
// with the node, often after the agent), and publishes each clique once
// it is known. Without it such a GB200 tray would be in no clique, and
// out of every pod group's placement, until the agent restarts. With
// cliqueLabel the node is labelled once no GPU is pending (before, its
// GPUs would disagree), retried until the API server takes it.
func (a *Agent) awaitCliques(ctx context.Context) {
	interval := a.opts.FabricPollInterval
	if interval <= 0 {
		interval = defaultFabricPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	pending, labelled := true, !a.opts.Config.CliqueLabel
	for pending || !labelled {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if pending {
			var changed bool
			changed, pending = a.rereadCliques(ctx)
			if changed {
				if err := a.publish(ctx); err != nil && ctx.Err() == nil {
					utilruntime.HandleErrorWithContext(ctx, err, "Republishing with the GPUs' NVLink clique")
				}
			}
		}
		if !pending && !labelled {
			err := labelClique(ctx, a.opts.KubeClient, a.opts.NodeName, a.gpuSnapshot())
			// GPUs that disagree on their clique are no reason to retry.
			labelled = err == nil || errors.Is(err, errLabelRemoved)
			if err != nil && ctx.Err() == nil {
				utilruntime.HandleErrorWithContext(ctx, err, "Clique label")
			}
		}
	}
}

// rereadCliques reads the clique of every GPU still pending; it says
// whether a clique became known and whether any GPU is still pending.
func (a *Agent) rereadCliques(ctx context.Context) (changed, pending bool) {
	a.publishMu.Lock()
	defer a.publishMu.Unlock()
	for i := range a.gpus {
		g := &a.gpus[i]
		if !g.CliquePending {
			continue
		}
		d, ret := a.opts.NVML.DeviceGetHandleByUUID(g.UUID)
		if ret != nvml.SUCCESS {
			pending = true // read again next time
			continue
		}
		g.CliqueID, g.CliquePending = discovery.ReadClique(d)
		if g.CliquePending {
			pending = true
			continue
		}
		changed = changed || g.CliqueID != ""
		klog.FromContext(ctx).Info("GPU's NVLink fabric is set up", "gpu", g.Index, "uuid", g.UUID, "clique", g.CliqueID)
	}
	return changed, pending
}

// gpuSnapshot copies the GPUs under the lock that guards their clique.
func (a *Agent) gpuSnapshot() []discovery.GPU {
	a.publishMu.Lock()
	defer a.publishMu.Unlock()
	return append([]discovery.GPU(nil), a.gpus...)
}
