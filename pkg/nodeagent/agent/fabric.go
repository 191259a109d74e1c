package agent

import (
	"context"
	"errors"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// defaultFabricPollInterval is how often the GPUs' multi-node NVLink
// cliques are read again: on every node, as NVML answers at once for a
// GPU without a fabric.
const defaultFabricPollInterval = 10 * time.Second

// followCliques reads the clique of every GPU again at each interval and
// publishes it when it changes:
//   - a fabric still being set up when the agent started (the fabric
//     manager starts with the node, often after the agent): without this
//     such a GB200 tray would be in no clique, and out of every pod
//     group's placement, until the agent restarts;
//   - a clique that changes later (the tray moved to another rack's
//     fabric) or is lost (the fabric reports an error): a stale clique
//     would send pod groups to GPUs that cannot reach each other.
//
// With cliqueLabel the node's label follows too, once no GPU is pending
// (before, its GPUs would disagree), retried until the API server takes
// it, and written again when another tool changed it (followNode sees
// that). labelled is the clique the label was set to at start, nil when
// it was not set then.
func (a *Agent) followCliques(ctx context.Context, labelled *string) {
	a.everyInterval(ctx, a.opts.FabricPollInterval, defaultFabricPollInterval, "Republishing with the GPUs' NVLink cliques", func() bool {
		changed, pending := a.rereadCliques(ctx)
		select {
		case <-a.labelDrift:
			labelled = nil
		default:
		}
		if !pending && a.opts.Config.CliqueLabel {
			labelled = a.relabel(ctx, labelled)
			a.labelled.Store(labelled)
		}
		return changed
	})
}

// noticeLabelDrift signals followCliques when the node's clique label is
// not the one last written.
func (a *Agent) noticeLabelDrift(labels map[string]string) {
	written := a.labelled.Load()
	if !a.opts.Config.CliqueLabel || written == nil || labels[contract.LabelClique] == *written {
		return
	}
	select {
	case a.labelDrift <- struct{}{}:
	default:
	}
}

// relabel sets the node's clique label when the GPUs' clique differs from
// labelled, the clique last written; it returns the clique written now.
func (a *Agent) relabel(ctx context.Context, labelled *string) *string {
	gpus := a.gpuSnapshot()
	want, _ := nodeClique(gpus)
	if labelled != nil && *labelled == want {
		return labelled
	}
	err := labelClique(ctx, a.opts.KubeClient, a.opts.NodeName, gpus)
	if err != nil && ctx.Err() == nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Clique label")
	}
	// GPUs that disagree on their clique are no reason to retry.
	if err == nil || errors.Is(err, errLabelRemoved) {
		return &want
	}
	return labelled
}

// everyInterval calls reread at each interval (def when 0) until ctx
// ends, and publishes the slices when it reports a change, again at the
// next interval while publishing fails.
func (a *Agent) everyInterval(ctx context.Context, interval, def time.Duration, what string, reread func() (changed bool)) {
	if interval <= 0 {
		interval = def
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	republish := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if republish = reread() || republish; !republish {
			continue
		}
		err := a.publish(ctx)
		republish = err != nil
		if err != nil && ctx.Err() == nil {
			utilruntime.HandleErrorWithContext(ctx, err, what)
		}
	}
}

// rereadCliques reads the clique of every GPU; it says whether one
// changed (became known, moved or was lost) and whether any GPU's fabric
// is still being set up. A GPU that does not answer, or whose read fails
// (lost, resetting), keeps what was read last: a passing error is no
// reason to take the node out of its clique.
func (a *Agent) rereadCliques(ctx context.Context) (changed, pending bool) {
	a.publishMu.Lock()
	defer a.publishMu.Unlock()
	logger := klog.FromContext(ctx)
	for i := range a.gpus {
		g := &a.gpus[i]
		d, ret := a.opts.NVML.DeviceGetHandleByUUID(g.UUID)
		if ret != nvml.SUCCESS {
			pending = pending || g.CliquePending
			continue
		}
		id, stillPending, ok := discovery.ReadClique(d)
		if !ok {
			pending = pending || g.CliquePending
			continue
		}
		pending = pending || stillPending
		if id == g.CliqueID && stillPending == g.CliquePending {
			continue
		}
		switch {
		case stillPending:
			logger.Info("GPU's NVLink fabric is being set up again", "gpu", g.Index, "uuid", g.UUID, "previousClique", g.CliqueID)
		case g.CliquePending:
			logger.Info("GPU's NVLink fabric is set up", "gpu", g.Index, "uuid", g.UUID, "clique", id)
		default:
			logger.Info("GPU's NVLink clique changed", "gpu", g.Index, "uuid", g.UUID, "clique", id, "previousClique", g.CliqueID)
		}
		changed = changed || id != g.CliqueID
		g.CliqueID, g.CliquePending = id, stillPending
	}
	return changed, pending
}

// gpuSnapshot copies the GPUs under the lock that guards their clique.
func (a *Agent) gpuSnapshot() []discovery.GPU {
	a.publishMu.Lock()
	defer a.publishMu.Unlock()
	return append([]discovery.GPU(nil), a.gpus...)
}
