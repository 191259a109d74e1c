package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/test/integration/framework"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
)

// cluster is one control plane: kube-apiserver on the shared etcd, the
// resourceclaim controller, and a client.
type cluster struct {
	t          *testing.T
	ctx        context.Context
	client     kubernetes.Interface
	config     *rest.Config
	kubeconfig string
}

func startCluster(t *testing.T, apiserverFlags ...string) *cluster {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	server := kubeapiservertesting.StartTestServerOrDie(t, nil, append([]string{
		"--runtime-config=resource.k8s.io/v1=true",
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}, apiserverFlags...), framework.SharedEtcd())
	t.Cleanup(func() {
		cancel()
		server.TearDownFn()
	})
	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	client := kubernetes.NewForConfigOrDie(cfg)
	c := &cluster{t: t, ctx: ctx, client: client, config: cfg, kubeconfig: writeKubeconfig(t, cfg)}

	// The resourceclaim controller turns templates into claims.
	factory := informers.NewSharedInformerFactory(client, 0)
	rc, err := resourceclaim.NewController(klog.FromContext(ctx), client,
		factory.Core().V1().Pods(), factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		t.Fatalf("resourceclaim controller: %v", err)
	}
	factory.Start(ctx.Done())
	go rc.Run(ctx, 5)
	// Cleanups run last-in first-out: stop the informers' context first.
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return c
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Scheduler configurations shipped in the manifests.
const (
	// bothProfiles: gputopo as the cluster's scheduler.
	bothProfiles = "../../manifests/scheduler/configmap.yaml"
	// gputopoOnly: gputopo next to the cluster's kube-scheduler.
	gputopoOnly = "../../manifests/scheduler/second-scheduler/configmap.yaml"
)

// schedulerConfig reads the KubeSchedulerConfiguration of a manifest's
// ConfigMap and points it at the test's API server.
func schedulerConfig(t *testing.T, configMap, kubeconfig string) string {
	t.Helper()
	raw, err := os.ReadFile(configMap)
	if err != nil {
		t.Fatal(err)
	}
	var cm v1.ConfigMap
	if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
		t.Fatalf("%s: %v", configMap, err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
		t.Fatalf("scheduler-config.yaml: %v", err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 500, "burst": 1000}
	// One instance per test; kube-scheduler exits the process when it
	// stops leading, which a test cannot allow.
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// setupScheduler parses flags and builds the scheduler as cmd/scheduler
// does, from a configuration file.
func (c *cluster) setupScheduler(ctx context.Context, configFile string, extraFlags ...string) (*schedulerserverconfig.CompletedConfig, *scheduler.Scheduler, error) {
	opts := options.NewOptions()
	fs := pflag.NewFlagSet("gputopo-scheduler", pflag.ContinueOnError)
	for _, set := range opts.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	flags := append([]string{"--config=" + configFile, "--secure-port=0"}, extraFlags...)
	if err := fs.Parse(flags); err != nil {
		return nil, nil, err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, nil, err
	}
	return app.Setup(ctx, opts, registry.SchedulerOptions()...)
}

// startScheduler runs the scheduler through the same Setup and Run as
// cmd/scheduler, with the configuration of the ConfigMap that serves both
// profiles. The returned function stops it and waits until it has stopped.
func (c *cluster) startScheduler() (stop func()) {
	return c.startSchedulerWith(bothProfiles)
}

// startSchedulerWith is startScheduler with another manifest's ConfigMap.
func (c *cluster) startSchedulerWith(configMap string, extraFlags ...string) (stop func()) {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	cc, sched, err := c.setupScheduler(ctx, schedulerConfig(t, configMap, c.kubeconfig), extraFlags...)
	if err != nil {
		cancel()
		t.Fatalf("scheduler setup: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		// app.Run registers the configuration globally; the next
		// scheduler in this process registers it again.
		configz.Delete("componentconfig")
	}
	t.Cleanup(stop)
	return stop
}

// node creates a schedulable node.
func (c *cluster) node(name string, labels map[string]string) {
	c.t.Helper()
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourcePods: resource.MustParse("500"), v1.ResourceCPU: resource.MustParse("256"), v1.ResourceMemory: resource.MustParse("2Ti")},
			Allocatable: v1.ResourceList{v1.ResourcePods: resource.MustParse("500"), v1.ResourceCPU: resource.MustParse("256"), v1.ResourceMemory: resource.MustParse("2Ti")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	created, err := c.client.CoreV1().Nodes().Create(c.ctx, n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create node %s: %v", name, err)
	}
	created.Status = n.Status
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(c.ctx, created, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("node %s status: %v", name, err)
	}
}

func (c *cluster) create(objs ...any) {
	c.t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *resourceapi.ResourceSlice:
			_, err = c.client.ResourceV1().ResourceSlices().Create(c.ctx, o, metav1.CreateOptions{})
		case *resourceapi.DeviceClass:
			_, err = c.client.ResourceV1().DeviceClasses().Create(c.ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaimTemplate:
			_, err = c.client.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaim:
			_, err = c.client.ResourceV1().ResourceClaims(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = c.client.CoreV1().Pods(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
		case *v1.Namespace:
			_, err = c.client.CoreV1().Namespaces().Create(c.ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unsupported %T", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.t.Fatalf("create %T: %v", o, err)
		}
	}
}

// waitFor polls cond until it holds or the timeout passes.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(c.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		c.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitScheduled waits for the pods to be bound and returns them.
func (c *cluster) waitScheduled(ns string, names ...string) map[string]*v1.Pod {
	c.t.Helper()
	out := map[string]*v1.Pod{}
	defer func() {
		if c.t.Failed() {
			for _, n := range names {
				if out[n] == nil {
					c.t.Logf("pod %s/%s not bound: %s", ns, n, c.schedulingMessage(ns, n))
				}
			}
		}
	}()
	c.waitFor(fmt.Sprintf("pods %v bound", names), 60*time.Second, func() (bool, error) {
		for _, n := range names {
			p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if p.Spec.NodeName == "" {
				return false, nil
			}
			out[n] = p
		}
		return true, nil
	})
	return out
}

// claimOf returns the claim a pod's resourceClaims entry resolved to.
func (c *cluster) claimOf(pod *v1.Pod, entry string) *resourceapi.ResourceClaim {
	c.t.Helper()
	var name string
	c.waitFor("claim name of "+pod.Name, 30*time.Second, func() (bool, error) {
		p, err := c.client.CoreV1().Pods(pod.Namespace).Get(c.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == entry && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
				return true, nil
			}
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.Name == entry && rc.ResourceClaimName != nil {
				name = *rc.ResourceClaimName
				return true, nil
			}
		}
		return false, nil
	})
	claim, err := c.client.ResourceV1().ResourceClaims(pod.Namespace).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return claim
}

// podCondition returns the pod's PodScheduled condition message.
func (c *cluster) schedulingMessage(ns, name string) string {
	p, err := c.client.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
			return cond.Message
		}
	}
	return ""
}

func clientConfigFromKubeconfig(path string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", path)
}
