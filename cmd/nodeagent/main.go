// Command nodeagent is gputopo's node agent, run by a DaemonSet on GPU
// nodes (manifests/nodeagent): it publishes the node's GPUs as
// ResourceSlices and prepares allocated claims for the kubelet. With
// --nvml=mock:<shape> it simulates a node without a GPU.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/version"
)

// stdout receives --version's line (a variable for the test).
var stdout io.Writer = os.Stdout

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return // usage printed, as asked
	}
	if err != nil {
		klog.ErrorS(err, "Node agent failed")
		klog.Flush()
		os.Exit(1)
	}
}

type flags struct {
	nodeName, configPath, nvmlSource, kubeconfig string
	pluginDir, registrarDir, cdiDir, sysRoot     string
	mock                                         mocknvml.Options
	mockFaults                                   string
	probe                                        time.Duration
	version                                      version.Request
}

func parse(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	fs.StringVar(&f.configPath, "config", "", "agent configuration file (YAML, see docs/nodeagent.md); empty uses the defaults")
	fs.StringVar(&f.nvmlSource, "nvml", "real", `"real" (the driver's libnvidia-ml) or "mock:<shape>" (`+fmt.Sprint(mocknvml.Shapes)+`)`)
	fs.BoolVar(&f.mock.MIG, "mock-mig", false, "mock NVML: MIG mode on")
	fs.StringVar(&f.mock.Rack, "mock-rack", "", "mock NVML: GB200 NVL72 rack of this tray")
	fs.StringVar(&f.mockFaults, "mock-faults", "", `mock NVML: a file whose appended lines fail the mock GPUs ("xid INDEX CODE", "lost INDEX", "found INDEX")`)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig; empty uses the in-cluster service account")
	fs.StringVar(&f.pluginDir, "plugin-dir", "", "kubelet plugin data directory (default /var/lib/kubelet/plugins/<driver>)")
	fs.StringVar(&f.registrarDir, "registrar-dir", kubeletplugin.KubeletRegistryDir, "kubelet plugin registry directory")
	fs.StringVar(&f.cdiDir, "cdi-dir", "/var/run/cdi", "directory for CDI specs")
	fs.StringVar(&f.sysRoot, "sysfs-root", "/", "root under which /sys is found, for PCIe roots and NUMA nodes")
	fs.DurationVar(&f.probe, "health-probe-interval", 5*time.Second, "how often GPUs are probed")
	fs.Var(&f.version, "version", "print the version and quit (raw: with the build information)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	// The flag package stops at the first word that is not a flag (the
	// "false" of "--mock-mig false"): what follows would be dropped.
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q: flags take the form --name=value", fs.Arg(0))
	}
	if f.version != "" {
		return f, nil
	}
	if f.nodeName == "" {
		return f, errors.New("--node-name (or $NODE_NAME) is required")
	}
	if f.probe < minProbeInterval {
		return f, fmt.Errorf("--health-probe-interval=%v: must be at least %v (where NVML gives no events the agent probes every GPU this often)", f.probe, minProbeInterval)
	}
	if !strings.HasPrefix(f.nvmlSource, "mock:") && (f.mock.MIG || f.mock.Rack != "" || f.mockFaults != "") {
		return f, fmt.Errorf("--mock-mig, --mock-rack and --mock-faults apply to --nvml=mock:<shape> only, not --nvml=%s", f.nvmlSource)
	}
	if f.mock.Rack != "" && f.nvmlSource != "mock:"+string(mocknvml.GB200Tray) {
		return f, fmt.Errorf("--mock-rack applies to --nvml=mock:%s only (a GB200 tray's NVLink fabric), not --nvml=%s", mocknvml.GB200Tray, f.nvmlSource)
	}
	f.mock.Name = f.nodeName
	return f, nil
}

// minProbeInterval bounds --health-probe-interval: a shorter one would
// keep a core busy probing GPUs.
const minProbeInterval = 100 * time.Millisecond

func run(ctx context.Context, args []string) error {
	f, err := parse(args)
	if err != nil {
		return err
	}
	if printed, err := f.version.Print(stdout, "gputopo-nodeagent"); printed {
		return err
	}
	cfg, err := config.Load(f.configPath)
	if err != nil {
		return err
	}
	lib, err := agent.OpenNVML(f.nvmlSource, f.mock)
	if err != nil {
		return err
	}
	restConfig, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	if f.pluginDir == "" {
		f.pluginDir = path.Join(kubeletplugin.KubeletPluginsDir, cfg.DriverName)
	}
	o := agent.Options{NodeName: f.nodeName, Config: cfg, NVML: lib, KubeClient: client,
		PluginDir: f.pluginDir, RegistrarDir: f.registrarDir, CDIDir: f.cdiDir, ProbeInterval: f.probe}
	if f.nvmlSource == "real" {
		o.PCIeRoot = agent.SysfsPCIeRoot(f.sysRoot)
		o.NUMANode = agent.SysfsNUMANode(f.sysRoot)
		o.CanManageMIG = agent.ProcessCanManageMIG
	}
	if srv, ok := lib.(*mocknvml.Server); ok && f.mockFaults != "" {
		go followFaults(ctx, srv, f.mockFaults)
	}
	a, err := agent.Start(ctx, o)
	if err != nil {
		return err
	}
	// A signal or a fatal error: the process exits (with the error, so
	// the DaemonSet restarts it).
	<-a.Done()
	a.Stop()
	return a.Err()
}

// followFaults shows the mock GPUs the faults appended to path.
func followFaults(ctx context.Context, lib *mocknvml.Server, path string) {
	logger := klog.FromContext(ctx)
	lib.FollowFaults(ctx, path, 100*time.Millisecond, func(line int, err error) {
		logger.Error(err, "Fault not applied", "file", path, "line", line)
	})
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (use --kubeconfig outside a pod): %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}
