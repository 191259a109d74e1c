package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// schedulerBinary, agentBinary and kubectlBinary are cmd/scheduler,
// cmd/nodeagent and cmd/kubectl-gputopo, built once by TestMain: tests
// run them as their own processes, as a cluster (and a person) runs them.
var schedulerBinary, agentBinary, kubectlBinary string

// buildBinaries builds the product's commands into dir.
func buildBinaries(dir string) error {
	schedulerBinary = filepath.Join(dir, "gputopo-scheduler")
	agentBinary = filepath.Join(dir, "gputopo-nodeagent")
	kubectlBinary = filepath.Join(dir, "kubectl-gputopo")
	for bin, pkg := range map[string]string{
		schedulerBinary: "github.com/gputopo/gputopo/cmd/scheduler",
		agentBinary:     "github.com/gputopo/gputopo/cmd/nodeagent",
		kubectlBinary:   "github.com/gputopo/gputopo/cmd/kubectl-gputopo",
	} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// Scheduler configurations shipped in the manifests.
const (
	// bothProfiles: gputopo as the cluster's scheduler.
	bothProfiles = "../../manifests/scheduler/configmap.yaml"
	// gputopoOnly: gputopo next to the cluster's kube-scheduler.
	gputopoOnly = "../../manifests/scheduler/second-scheduler/configmap.yaml"
	// schedulerSA is the identity the manifests give the scheduler.
	schedulerNamespace = "gputopo-system"
	schedulerSA        = "gputopo-scheduler"
	schedulerUser      = "system:serviceaccount:" + schedulerNamespace + ":" + schedulerSA
)

// schedulerConfig reads the KubeSchedulerConfiguration of a manifest's
// ConfigMap unchanged but for where the API server is.
func schedulerConfig(t *testing.T, configMap, kubeconfig string) string {
	t.Helper()
	return schedulerConfigWith(t, configMap, kubeconfig, nil)
}

// schedulerConfigWith is schedulerConfig with a change of the test's
// (edit receives the decoded KubeSchedulerConfiguration).
func schedulerConfigWith(t *testing.T, configMap, kubeconfig string, edit func(cfg map[string]any)) string {
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
	if edit != nil {
		edit(cfg)
	}
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

// serviceAccountKubeconfig installs the manifests' namespace, service
// account and RBAC for the scheduler (once per cluster) and returns a
// kubeconfig with a token of that service account, as a pod of the
// Deployment gets it.
func (c *cluster) serviceAccountKubeconfig(ns, sa, manifests string) string {
	c.t.Helper()
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Get(c.ctx, sa, metav1.GetOptions{}); err != nil {
		c.apply(manifests, "")
	}
	tr, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(c.ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("token for %s/%s: %v", ns, sa, err)
	}
	cfg := rest.AnonymousClientConfig(c.config)
	cfg.BearerToken = tr.Status.Token
	path := writeKubeconfig(c.t, cfg)
	c.wantIdentity(path, "system:serviceaccount:"+ns+":"+sa)
	return path
}

// impersonatingKubeconfig is the test driver's credentials acting as
// user: for identities that are no service account (kube-scheduler's
// system:kube-scheduler).
func (c *cluster) impersonatingKubeconfig(user string, groups ...string) string {
	c.t.Helper()
	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	path := writeKubeconfig(c.t, cfg)
	c.wantIdentity(path, user, groups...)
	return path
}

// wantIdentity fails the test unless the kubeconfig at path acts as user,
// in the groups given among others (SelfSubjectReview): a process given
// it must not run as the driver.
func (c *cluster) wantIdentity(path, user string, groups ...string) {
	c.t.Helper()
	cfg, err := clientConfigFromKubeconfig(path)
	if err != nil {
		c.t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(c.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("who is %s: %v", path, err)
	}
	got := review.Status.UserInfo
	if got.Username != user {
		c.t.Fatalf("kubeconfig %s acts as %q, want %q", path, got.Username, user)
	}
	for _, g := range groups {
		if !slices.Contains(got.Groups, g) {
			c.t.Fatalf("kubeconfig %s acts as %q in groups %v, want group %q", path, got.Username, got.Groups, g)
		}
	}
}

// process is one running binary of the product.
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startScheduler runs gputopo's scheduler with the ConfigMap that serves
// both profiles, under the manifests' service account.
func (c *cluster) startScheduler() (stop func()) {
	return c.startSchedulerWith(bothProfiles)
}

// startSchedulerWith runs the scheduler binary with a manifest's
// ConfigMap, under the manifests' service account and RBAC, with leader
// election as shipped. stop ends it with SIGTERM and waits.
func (c *cluster) startSchedulerWith(configMap string, extraFlags ...string) (stop func()) {
	c.t.Helper()
	p := c.runScheduler("gputopo", schedulerConfig(c.t, configMap, c.schedulerKubeconfig(configMap)), extraFlags...)
	return func() { p.stop(syscall.SIGTERM) }
}

// leaseRoles: the Role that grants each install's leader-election
// lease, by the install's ConfigMap (replacing kube-scheduler, its lease
// in kube-system; next to it, its own in gputopo-system).
var leaseRoles = map[string]struct{ namespace, file string }{
	bothProfiles: {"kube-system", "../../manifests/scheduler/leader-election.yaml"},
	gputopoOnly:  {schedulerNamespace, "../../manifests/scheduler/second-scheduler/leader-election.yaml"},
}

// schedulerKubeconfig is the kubeconfig of gputopo's service account,
// with the lease grant of the install whose ConfigMap the scheduler runs
// (configMap) and no other, so that a ConfigMap whose lease its install
// does not grant never becomes leader.
func (c *cluster) schedulerKubeconfig(configMap string) string {
	c.t.Helper()
	kubeconfig := c.serviceAccountKubeconfig(schedulerNamespace, schedulerSA, "../../manifests/scheduler/base")
	role, ok := leaseRoles[configMap]
	if !ok {
		c.t.Fatalf("no install's lease Role for %s", configMap)
	}
	// A test may have applied the install's directory already.
	if _, err := c.client.RbacV1().Roles(role.namespace).Get(c.ctx, "gputopo-scheduler-leader-election", metav1.GetOptions{}); err != nil {
		c.apply(role.file, "")
	}
	return kubeconfig
}

// profileArgs sets a plugin's args in a profile of a decoded
// KubeSchedulerConfiguration, adding the plugin's entry if needed.
func profileArgs(cfg map[string]any, profile, plugin string, args map[string]any) {
	for _, p := range cfg["profiles"].([]any) {
		p := p.(map[string]any)
		if p["schedulerName"] != profile {
			continue
		}
		pcs, _ := p["pluginConfig"].([]any)
		for _, pc := range pcs {
			if pc := pc.(map[string]any); pc["name"] == plugin {
				for k, v := range args {
					pc["args"].(map[string]any)[k] = v
				}
				return
			}
		}
		p["pluginConfig"] = append(pcs, map[string]any{"name": plugin, "args": args})
	}
}

// runScheduler starts the scheduler binary with a configuration file.
func (c *cluster) runScheduler(name, config string, extraFlags ...string) *process {
	c.t.Helper()
	args := append([]string{"--config=" + config, "--secure-port=0", "--v=3"}, extraFlags...)
	return c.runBinary(name, schedulerBinary, args...)
}

// runBinary starts a binary; the process is killed at the end of the
// test, and its log shown if the test failed.
func (c *cluster) runBinary(name, binary string, args ...string) *process {
	t := c.t
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tail(log, 60))
		}
	})
	return p
}

// stop sends sig and waits for the process to end.
func (p *process) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has ended and how.
func (p *process) exited() (bool, string) {
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.String()
	default:
		return false, ""
	}
}

// waitExit waits for the process to end by itself.
func (p *process) waitExit(ctx context.Context, timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.cmd.Path, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
