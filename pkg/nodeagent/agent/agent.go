// Package agent is the gputopo node agent: it discovers the node's GPUs
// through NVML, publishes them as ResourceSlices through the kubeletplugin
// helper's resourceslice controller, serves the kubelet's DRA gRPC
// service (prepare and unprepare), and republishes with taints when a GPU
// turns unhealthy.
package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/health"
	"github.com/gputopo/gputopo/pkg/nodeagent/prepare"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// Options of an agent.
type Options struct {
	NodeName   string
	Config     config.Config
	NVML       nvml.Interface
	KubeClient kubernetes.Interface
	// PCIeRoot maps a PCI bus ID to its root complex (sysfs on a real
	// node); nil leaves the attribute out.
	PCIeRoot func(busID string) (string, error)
	// NUMANode maps a PCI bus ID to its NUMA node (sysfs on a real node,
	// SysfsNUMANode); nil asks NVML (mock NVML).
	NUMANode func(busID string) (int, error)
	// CanManageMIG says whether the process may create MIG instances
	// (ProcessCanManageMIG on a real node); checked only when a GPU is
	// in MIG mode. Nil: not checked (mock NVML).
	CanManageMIG func() error
	// PluginDir is the kubelet plugin's data directory (its DRA socket,
	// the checkpoint, and AckDir, where operators acknowledge a GPU's
	// recovery from a fatal Xid); RegistrarDir the kubelet's plugin
	// registry.
	PluginDir    string
	RegistrarDir string
	// CDIDir receives the claims' CDI specs.
	CDIDir string
	// ProbeInterval of the health monitor; 0 = its default.
	ProbeInterval time.Duration
	// FabricPollInterval: how often the GPUs' NVLink cliques are read
	// again, to publish one that becomes known, changes or is lost;
	// 0 = 10s.
	FabricPollInterval time.Duration
	// MIGPollInterval: how often the GPU instances of GPUs in MIG mode
	// are listed again, to withhold the partitions of those that others
	// made and offer them again once they are gone; 0 = 30s.
	MIGPollInterval time.Duration
}

// Agent runs on one node.
type Agent struct {
	opts Options
	// publishMu serializes publishing, and guards the GPUs' cliques
	// (read when publishing, written by followCliques) and the layout's
	// withheld devices (written by followForeignInstances). The layout's
	// devices point into gpus.
	publishMu sync.Mutex
	gpus      []discovery.GPU
	layout    *resources.Layout
	preparer  *prepare.Preparer
	monitor   *health.Monitor
	helper    *kubeletplugin.Helper
	cancel    context.CancelCauseFunc
	done      <-chan struct{}
	wg        sync.WaitGroup

	mu      sync.Mutex
	healthy chan struct{} // closed and replaced when taints change
	fatal   error

	// labelled is the clique label value last written (cliqueLabel);
	// labelDrift is signalled when the Node's label differs from it
	// (another tool changed or removed it), so that followCliques
	// writes it again.
	labelled   atomic.Pointer[string]
	labelDrift chan struct{}
}

var _ kubeletplugin.DRAPlugin = (*Agent)(nil)

// Start discovers, publishes and serves until Stop or ctx ends.
func Start(ctx context.Context, o Options) (*Agent, error) {
	logger := klog.FromContext(ctx)
	if o.NodeName == "" {
		return nil, errors.New("node agent: node name is required")
	}
	// Each directory named as the flag that sets it (cmd/nodeagent).
	for _, dir := range []struct{ flag, path string }{
		{"--plugin-dir", o.PluginDir}, {"--plugin-dir", AckDir(o.PluginDir)}, {"--registrar-dir", o.RegistrarDir}, {"--cdi-dir", o.CDIDir},
	} {
		if err := os.MkdirAll(dir.path, 0o750); err != nil {
			return nil, fmt.Errorf("node agent: %s: %w", dir.flag, err)
		}
	}
	gpus, err := discovery.Discover(o.NVML, discovery.Options{PCIeRoot: o.PCIeRoot, NUMANode: o.NUMANode, Problem: func(index int, err error) {
		logger.Error(err, "GPU left out or only partly described", "index", index)
	}})
	if err != nil {
		return nil, fmt.Errorf("node agent: discover GPUs: %w", err)
	}
	// Before the layout: without SYS_ADMIN, NVML refuses the MIG
	// placements the layout is made of, and this says why.
	if err := checkMIGPrivilege(gpus, o.Config, o.CanManageMIG); err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	layout, err := resources.NewLayout(o.NodeName, gpus, o.Config)
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	preparer, err := prepare.New(o.NVML, layout, prepare.Options{
		CheckpointPath: filepath.Join(o.PluginDir, "checkpoint.json"), CDIDir: o.CDIDir})
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	uuids := make([]string, len(gpus))
	for i, g := range gpus {
		uuids[i] = g.UUID
	}
	ctx, cancel := context.WithCancelCause(ctx)
	a := &Agent{opts: o, gpus: gpus, layout: layout, preparer: preparer, cancel: cancel, done: ctx.Done(), healthy: make(chan struct{}), labelDrift: make(chan struct{}, 1),
		monitor: health.New(o.NVML, uuids, health.Options{Policy: o.Config.Health, ProbeInterval: o.ProbeInterval, AckDir: AckDir(o.PluginDir),
			StatePath: filepath.Join(o.PluginDir, "health.json")})}
	a.withholdForeignInstances(logger)
	restoreErr := a.monitor.Restore(ctx)
	if err := awaitSliceAccess(ctx, o.KubeClient, o.Config.DriverName, o.NodeName, time.Second, 30*time.Second); err != nil {
		cancel(err)
		preparer.Close()
		return nil, err
	}
	if restoreErr != nil {
		a.adoptPublishedTaints(ctx, restoreErr)
	}
	node, err := ownNode(ctx, o)
	if err != nil {
		cancel(err)
		preparer.Close()
		return nil, err
	}
	uid := node.UID
	// Before the first publish: a GPU a device plugin hands out must not
	// be offered untainted even for a moment.
	a.noticeDevicePlugin(ctx, node)
	helper, err := kubeletplugin.Start(ctx, a,
		kubeletplugin.DriverName(o.Config.DriverName),
		kubeletplugin.NodeName(o.NodeName),
		kubeletplugin.NodeUID(uid),
		kubeletplugin.KubeClient(o.KubeClient),
		kubeletplugin.PluginDataDirectoryPath(o.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(o.RegistrarDir),
	)
	if err != nil {
		cancel(err)
		preparer.Close()
		return nil, fmt.Errorf("node agent: start kubelet plugin: %w", err)
	}
	a.helper = helper
	if err := a.publish(ctx); err != nil {
		a.Stop()
		return nil, err
	}
	pending := slices.ContainsFunc(gpus, func(g discovery.GPU) bool { return g.CliquePending })
	// While the fabric is set up the label is left as it is, and a label
	// the API server refuses now is only missing: followCliques sets it.
	var labelled *string
	if o.Config.CliqueLabel && !pending {
		labelled = a.relabel(ctx, nil)
	}
	if pending {
		logger.Info("NVLink fabric still being set up: the clique is published once it is known", "node", o.NodeName)
	}
	// Before followNode starts: its first event may already show a label
	// another tool changed.
	a.labelled.Store(labelled)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.followCliques(ctx, labelled)
	}()
	go func() {
		defer a.wg.Done()
		a.followNode(ctx, uid)
	}()
	if slices.ContainsFunc(gpus, func(g discovery.GPU) bool { return g.MIGEnabled }) {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.followForeignInstances(ctx)
		}()
	}
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		if err := a.monitor.Run(ctx); err != nil {
			// Without its monitor the agent would keep telling the
			// kubelet the last health it knew: stop, and be restarted.
			a.HandleError(ctx, err, "Health monitor stopped")
		}
	}()
	go func() {
		defer a.wg.Done()
		a.republishOnHealthChanges(ctx)
	}()
	logger.Info("Node agent started", "node", o.NodeName, "driver", o.Config.DriverName, "gpus", len(gpus), "devices", len(layout.Devices))
	// Which rule of the configuration applied shows only here: a rule
	// that matched no GPU is otherwise silent.
	for _, g := range gpus {
		logger.Info("GPU configured", "index", g.Index, "product", g.Product, "uuid", g.UUID, "mode", o.Config.ModeOf(g.Index, g.Product))
	}
	return a, nil
}

// AckDir is where an operator writes a file named after a GPU's UUID to
// acknowledge its recovery from a fatal Xid.
func AckDir(pluginDir string) string { return filepath.Join(pluginDir, "recovered") }

// Layout is the node's devices: those published, and those withheld
// from publication (Layout.WithholdOnly).
func (a *Agent) Layout() *resources.Layout { return a.layout }

// Preparer applies allocations on the node.
func (a *Agent) Preparer() *prepare.Preparer { return a.preparer }

// Done is closed once the agent stops: its context ended, Stop was
// called, or a fatal error (Err) stopped it.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err is the fatal error that stopped the agent, if any.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatal
}

// Stop stops serving and publishing; published slices stay (the kubelet
// removes them when the plugin unregisters, or the node goes away).
func (a *Agent) Stop() {
	a.cancel(errors.New("node agent stopped"))
	a.helper.Stop()
	a.wg.Wait()
	a.preparer.Close()
}

func (a *Agent) publish(ctx context.Context) error {
	a.publishMu.Lock()
	defer a.publishMu.Unlock()
	if err := a.helper.PublishResources(ctx, a.layout.Resources(a.monitor.Taints())); err != nil {
		return fmt.Errorf("node agent: publish ResourceSlices: %w", err)
	}
	return nil
}

func (a *Agent) republishOnHealthChanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.monitor.Changed():
		}
		if err := a.publish(ctx); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Republishing after a health change")
		}
		a.mu.Lock()
		close(a.healthy)
		a.healthy = make(chan struct{})
		a.mu.Unlock()
	}
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin.
func (a *Agent) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		devs, err := a.preparer.Prepare(ctx, c)
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs, Err: err}
	}
	return out, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin.
func (a *Agent) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = a.preparer.Unprepare(ctx, c.UID)
	}
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin: publishing errors are
// logged; a fatal one stops the agent (its process then exits, and the
// DaemonSet restarts it).
func (a *Agent) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		a.mu.Lock()
		a.fatal = fmt.Errorf("%s: %w", msg, err)
		a.mu.Unlock()
		a.cancel(err)
	}
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: the kubelet
// learns each device's health (shown in the pod status), refreshed well
// within its timeout and at once on change.
func (a *Agent) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	for {
		a.mu.Lock()
		changed := a.healthy
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case reports <- a.healthReport():
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(10 * time.Second):
		}
	}
}

func (a *Agent) healthReport() kubeletplugin.DeviceHealthReport {
	taints := a.monitor.Taints()
	now := time.Now()
	var r kubeletplugin.DeviceHealthReport
	for _, d := range a.layout.Devices {
		h := kubeletplugin.DeviceHealth{PoolName: a.layout.Pool(), DeviceName: d.Name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
		if t, ok := taints[d.GPU.UUID]; ok {
			h.Health = kubeletplugin.HealthStatusUnhealthy
			h.Message = fmt.Sprintf("GPU %s: %s (%s)", d.GPU.UUID, t.Value, t.Effect)
		}
		r.Devices = append(r.Devices, h)
	}
	return r
}

// checkMIGPrivilege stops an agent whose configuration puts a GPU in MIG
// mode but that may not create MIG instances, naming the first such GPU.
func checkMIGPrivilege(gpus []discovery.GPU, cfg config.Config, canManage func() error) error {
	i := slices.IndexFunc(gpus, func(g discovery.GPU) bool { return cfg.ModeOf(g.Index, g.Product) == config.MIG })
	if canManage == nil || i < 0 {
		return nil
	}
	if err := canManage(); err != nil {
		return fmt.Errorf("GPU %d (%s) is configured for mode %q: %w", gpus[i].Index, gpus[i].Product, config.MIG, err)
	}
	return nil
}
