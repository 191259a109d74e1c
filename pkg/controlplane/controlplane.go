// Package controlplane runs a Kubernetes control plane inside a process:
// etcd (embedded), kube-apiserver (through its in-process test server,
// which generates certificates and keys), the resourceclaim controller and
// the scheduler with gputopo's plugins, configured from the manifests'
// ConfigMap. The demo runs all of it; the integration tests use its
// pieces (the claim controller, kubeconfigs) around their own API server
// with RBAC and the scheduler as a separate process. Nothing is
// downloaded and no container runs.
package controlplane

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/manifests"
	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

// ControlPlane is a running control plane.
type ControlPlane struct {
	Client     kubernetes.Interface
	Config     *rest.Config
	Kubeconfig string
	tb         *tb
	cancel     context.CancelFunc
	done       []chan struct{}
	stops      []func()
}

// Options of a control plane.
type Options struct {
	// PodGroups turns on the Workload API and the scheduler's gates for
	// pod groups, as manifests/pod-groups does. The gates are the
	// process's and kube-scheduler reads some once per process: only the
	// process's first control plane may ask for them.
	PodGroups bool
}

// Start runs etcd, kube-apiserver, the resourceclaim controller and the
// scheduler (both profiles of manifests/scheduler/configmap.yaml:
// default-scheduler with the in-tree DynamicResources plugin and
// gputopo-scheduler). dir holds their state.
func Start(ctx context.Context, dir string) (*ControlPlane, error) {
	return StartWith(ctx, dir, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, dir string, o Options) (cp *ControlPlane, err error) {
	t := &tb{name: "gputopo-demo"}
	ctx, cancel := context.WithCancel(ctx)
	cp = &ControlPlane{tb: t, cancel: cancel}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("control plane: %s", f.msg)
		}
		if err != nil {
			cp.Stop()
		}
	}()
	etcdURL, stopEtcd, err := startEtcd(dir)
	if err != nil {
		return cp, err
	}
	t.Cleanup(stopEtcd)
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	runtimeConfig := "--runtime-config=resource.k8s.io/v1=true"
	var schedulerFlags []string
	if o.PodGroups {
		// The API server runs in this process: it reads the process's
		// gates, which the scheduler's flag sets too.
		gates, err := PodGroupGates()
		if err != nil {
			return cp, err
		}
		if err := utilfeature.DefaultMutableFeatureGate.Set(strings.TrimPrefix(gates, "--feature-gates=")); err != nil {
			return cp, fmt.Errorf("pod-group feature gates: %w", err)
		}
		runtimeConfig += ",scheduling.k8s.io/v1beta1=true"
		schedulerFlags = append(schedulerFlags, gates)
	}
	server, err := kubeapiservertesting.StartTestServer(t, nil, []string{
		runtimeConfig,
		// No service account or node lifecycle controllers run here.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}, storage)
	if err != nil {
		return cp, fmt.Errorf("kube-apiserver: %w", err)
	}
	t.Cleanup(server.TearDownFn)
	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.QPS, cfg.Burst = 1000, 2000
	cp.Config = cfg
	cp.Client = kubernetes.NewForConfigOrDie(cfg)
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(cp.Kubeconfig, cfg); err != nil {
		return cp, err
	}

	stopClaims, err := StartClaimController(ctx, cp.Client, 10)
	if err != nil {
		return cp, err
	}
	cp.stops = append(cp.stops, stopClaims)

	schedDone, err := startScheduler(ctx, dir, cp.Kubeconfig, schedulerFlags...)
	if err != nil {
		return cp, err
	}
	cp.done = append(cp.done, schedDone)
	return cp, nil
}

// Stop stops everything Start started.
func (cp *ControlPlane) Stop() {
	cp.cancel()
	for _, d := range cp.done {
		<-d
	}
	for _, stop := range cp.stops {
		stop()
	}
	cp.tb.cleanup()
	// kube-scheduler registers its configuration process-wide and never
	// takes it back: without this, the scheduler of a later control plane
	// in this process (go test -count=2) would stop at once, and its pods
	// would wait for nothing.
	configz.Delete(schedulerConfigz)
}

// schedulerConfigz is the name kube-scheduler's app.Run registers its
// configuration under.
const schedulerConfigz = "componentconfig"

// PodGroupGates is the --feature-gates argument manifests/pod-groups
// gives the scheduler.
func PodGroupGates() (string, error) {
	var ops []struct{ Value string }
	if err := yaml.Unmarshal(manifests.PodGroupsFeatureGates, &ops); err != nil || len(ops) != 1 || !strings.HasPrefix(ops[0].Value, "--feature-gates=") {
		return "", fmt.Errorf("manifests/pod-groups/feature-gates.yaml: want one --feature-gates argument (%v)", err)
	}
	return ops[0].Value, nil
}

func startScheduler(ctx context.Context, dir, kubeconfig string, extraFlags ...string) (chan struct{}, error) {
	data, err := manifests.SchedulerConfigFrom(manifests.SchedulerConfigMap)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 1000, "burst": 2000}
	// One scheduler in this process: no election (kube-scheduler exits
	// the process when it stops leading).
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return nil, err
	}
	opts := options.NewOptions()
	fs := pflag.NewFlagSet("gputopo-scheduler", pflag.ContinueOnError)
	for _, set := range opts.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	if err := fs.Parse(append([]string{"--config=" + path, "--secure-port=0"}, extraFlags...)); err != nil {
		return nil, err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	cc, sched, err := app.Setup(ctx, opts, registry.SchedulerOptions()...)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Scheduler stopped")
		}
	}()
	return done, nil
}

// StartClaimController runs kube-controller-manager's resourceclaim
// controller, which creates the claims of pods' templates and records
// them in the pods' status; stop ends it and waits.
func StartClaimController(ctx context.Context, client kubernetes.Interface, workers int) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	rc, err := resourceclaim.NewController(klog.FromContext(ctx), client,
		factory.Core().V1().Pods(), factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("resourceclaim controller: %w", err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); rc.Run(ctx, workers) }()
	return func() {
		cancel()
		<-done
		factory.Shutdown()
	}, nil
}

// WriteKubeconfig writes a kubeconfig file for cfg (server, CA, token or
// client certificate, and the identity it impersonates, if any) at path.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gputopo"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["gputopo"] = &clientcmdapi.AuthInfo{
		Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Impersonate: cfg.Impersonate.UserName, ImpersonateUID: cfg.Impersonate.UID,
		ImpersonateGroups: cfg.Impersonate.Groups, ImpersonateUserExtra: cfg.Impersonate.Extra,
	}
	kc.Contexts["gputopo"] = &clientcmdapi.Context{Cluster: "gputopo", AuthInfo: "gputopo"}
	kc.CurrentContext = "gputopo"
	return clientcmd.WriteToFile(*kc, path)
}

// CreateNode creates a ready node with the given capacity (zero: 128
// CPUs, 1Ti memory) for up to 1,000 pods, labelled with its hostname
// besides labels. No kubelet runs for it: nothing makes it unready.
func CreateNode(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string, cpu, memory resource.Quantity) error {
	if cpu.IsZero() {
		cpu = resource.MustParse("128")
	}
	if memory.IsZero() {
		memory = resource.MustParse("1Ti")
	}
	all := map[string]string{"kubernetes.io/hostname": name}
	maps.Copy(all, labels)
	capacity := v1.ResourceList{v1.ResourcePods: resource.MustParse("1000"), v1.ResourceCPU: cpu, v1.ResourceMemory: memory}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all}}
	created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	created.Status = v1.NodeStatus{Capacity: capacity, Allocatable: capacity,
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return nil
}
