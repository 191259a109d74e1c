package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/test/integration/framework"

	"github.com/gputopo/gputopo/pkg/controlplane"
)

// cluster is one control plane: kube-apiserver on the shared etcd, the
// resourceclaim controller, and a client.
type cluster struct {
	t          *testing.T
	ctx        context.Context
	client     kubernetes.Interface
	config     *rest.Config
	kubeconfig string
	apiserver  *apiServer
	// agentConfigs: the node agent's credentials per node (agentConfig).
	agentConfigs map[string]*rest.Config
}

// ownerReferencesEnforced adds the admission plugin that hardened
// clusters (OpenShift, for one) enable: changing an object's owners needs
// delete on it, and an owner that blocks deletion needs update on the
// owner's finalizers. It is off by default, as in kubeadm's clusters; on,
// it would refuse some probes before the product's admission policies
// see them.
const ownerReferencesEnforced = "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"

func startCluster(t *testing.T, apiserverFlags ...string) *cluster {
	t.Helper()
	return newCluster(t, false, apiserverFlags)
}

// startRestartableCluster is startCluster whose API server can restart
// (c.apiserver.restart) while every client keeps working.
func startRestartableCluster(t *testing.T) *cluster {
	t.Helper()
	return newCluster(t, true, nil)
}

func newCluster(t *testing.T, restartable bool, apiserverFlags []string) *cluster {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	audit := newAuditLog(t)
	s := &apiServer{t: t, storage: framework.SharedEtcd(), flags: append(append([]string{
		"--runtime-config=resource.k8s.io/v1=true",
		// As a real cluster: the Node and RBAC authorizers, and admission
		// with NodeRestriction (ValidatingAdmissionPolicy and
		// ServiceAccount are on by default). TaintNodesByCondition is off:
		// no kubelet ever makes the test's nodes ready again.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--disable-admission-plugins=TaintNodesByCondition",
	}, audit.flags()...), apiserverFlags...)}
	var caPEM []byte
	if restartable {
		caPEM = s.makeRestartable()
	}
	s.start()
	t.Cleanup(func() {
		cancel()
		s.stop()
		audit.collect()
	})
	cfg := rest.CopyConfig(s.server.ClientConfig)
	if restartable {
		cfg = s.driverConfig(ctx, caPEM)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client := kubernetes.NewForConfigOrDie(cfg)
	c := &cluster{t: t, ctx: ctx, client: client, config: cfg, kubeconfig: writeKubeconfig(t, cfg), apiserver: s, agentConfigs: map[string]*rest.Config{}}
	// The ServiceAccount admission plugin wants every pod's account to
	// exist; no serviceaccount controller runs here.
	c.defaultServiceAccount("default")

	// The resourceclaim controller turns templates into claims.
	stopClaims, err := controlplane.StartClaimController(ctx, client, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: this one before the API server's.
	t.Cleanup(stopClaims)
	return c
}

// defaultServiceAccount creates the namespace's default service account.
func (c *cluster) defaultServiceAccount(ns string) {
	c.t.Helper()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(c.ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatalf("service account %s/default: %v", ns, err)
	}
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// node creates a schedulable node with room for any test's pods.
func (c *cluster) node(name string, labels map[string]string) {
	c.t.Helper()
	if err := controlplane.CreateNode(c.ctx, c.client, name, labels, resource.MustParse("256"), resource.MustParse("2Ti")); err != nil {
		c.t.Fatal(err)
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
		case *v1.PersistentVolume:
			_, err = c.client.CoreV1().PersistentVolumes().Create(c.ctx, o, metav1.CreateOptions{})
		case *v1.PersistentVolumeClaim:
			_, err = c.client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
		case *storagev1.StorageClass:
			_, err = c.client.StorageV1().StorageClasses().Create(c.ctx, o, metav1.CreateOptions{})
		case *v1.Namespace:
			_, err = c.client.CoreV1().Namespaces().Create(c.ctx, o, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				c.defaultServiceAccount(o.Name)
			}
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
