package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/charts"
	"github.com/gputopo/gputopo/pkg/contract"
)

// helmInstall renders charts/gputopo with values, as `helm install gputopo
// charts/gputopo -n gputopo-system --create-namespace -f values` does, and
// creates the objects through the API server as the test driver (Helm
// runs with the installing person's credentials).
func (c *cluster) helmInstall(values string) {
	c.t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		c.t.Fatal(err)
	}
	ms, err := charts.Render("gputopo", schedulerNamespace, v)
	if err != nil {
		c.t.Fatalf("helm template: %v", err)
	}
	dir := c.t.TempDir()
	for i, m := range ms {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.yaml", i)), []byte(m.YAML), 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	c.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: schedulerNamespace}}) // --create-namespace
	c.apply(dir, schedulerNamespace)
}

// schedulerFromDeployment runs the scheduler binary as a pod of the
// installed Deployment runs: its ConfigMap, its arguments, its service
// account's token.
func (c *cluster) schedulerFromDeployment() *process {
	c.t.Helper()
	d, err := c.client.AppsV1().Deployments(schedulerNamespace).Get(c.ctx, "gputopo-scheduler", metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("the chart's Deployment: %v", err)
	}
	cm, err := c.client.CoreV1().ConfigMaps(schedulerNamespace).Get(c.ctx, configMapOf(d), metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("the Deployment's ConfigMap: %v", err)
	}
	file := filepath.Join(c.t.TempDir(), "configmap.yaml")
	raw, err := yaml.Marshal(cm)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		c.t.Fatal(err)
	}
	kubeconfig := c.serviceAccountKubeconfig(schedulerNamespace, d.Spec.Template.Spec.ServiceAccountName, "")
	var flags []string
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if !strings.HasPrefix(arg, "--config=") {
			flags = append(flags, arg)
		}
	}
	return c.runScheduler("gputopo", schedulerConfig(c.t, file, kubeconfig), flags...)
}

func configMapOf(d *appsv1.Deployment) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}

// From `helm install` to `kubectl gputopo nodes`: the chart's objects on a
// real API server with RBAC and admission, the node agents and the
// scheduler run as its DaemonSet's and Deployment's pods would (their
// service accounts, ConfigMaps and arguments), both profiles serve pods,
// and kubectl gputopo reads the result under the chart's viewer role.
func TestHelmInstall(t *testing.T) {
	c := startCluster(t)
	c.helmInstall("nodeAgent: {cliqueLabel: true}")

	trays := []string{"tray-0", "tray-1"}
	for _, n := range trays {
		c.node(n, map[string]string{"nvidia.com/gpu.present": "true"})
		c.runAgentProcess(n, "gb200-tray", "--mock-rack=rack-1")
	}
	for _, n := range trays {
		c.waitFor("slices and clique label of "+n, 60*time.Second, func() (bool, error) {
			node, err := c.client.CoreV1().Nodes().Get(c.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			devices, _ := c.poolDevices(n)
			return devices == 4 && node.Labels[contract.LabelClique] != "", nil
		})
	}
	// The clique-label policy: a finalizer or an owner on its own Node
	// would let the agent block or garbage-collect the Node.
	for name, patch := range map[string]string{
		"finalizer": `{"metadata":{"finalizers":["example.com/hold"]}}`,
		"owner":     `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000000"}]}}`,
	} {
		_, err := c.agentProbeClient(trays[0]).CoreV1().Nodes().Patch(c.ctx, trays[0], types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil || !strings.Contains(err.Error(), "may change only the nvidia.com/gpu.clique label") {
			t.Errorf("agent of %s adding a %s to its Node: %v", trays[0], name, err)
		}
	}

	scheduler := c.schedulerFromDeployment()
	const ns = "default"
	c.create(
		gpuTemplate(ns, "two-gpus", agentDriver, 2), podWithTemplate(ns, "tp2", "two-gpus", "gputopo-scheduler"),
		gpuTemplate(ns, "one-gpu", agentDriver, 1), podWithTemplate(ns, "plain", "one-gpu", "default-scheduler"),
	)
	pods := c.waitScheduled(ns, "tp2", "plain")
	if done, state := scheduler.exited(); done {
		t.Fatalf("scheduler exited: %s", state)
	}
	claims := map[string]string{}
	for name, pod := range pods {
		claim := c.claimOf(pod, "dev")
		claims[name] = claim.Name
		if claim.Status.Allocation == nil {
			t.Fatalf("claim %s of %s not allocated", claim.Name, name)
		}
	}

	viewer := c.serviceAccountKubeconfig(schedulerNamespace, "gputopo-viewer", "")
	out, err := exec.CommandContext(c.ctx, kubectlBinary, "nodes", "--kubeconfig", viewer).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl gputopo nodes: %v\n%s", err, out)
	}
	t.Logf("kubectl gputopo nodes:\n%s", out)
	for name, claim := range claims {
		if want := "claim " + ns + "/" + claim + " for pod " + ns + "/" + name; !strings.Contains(string(out), want) {
			t.Errorf("kubectl gputopo nodes lacks %q", want)
		}
	}
	if lines := strings.Count(string(out), "\n"); lines != 1+8 {
		t.Errorf("kubectl gputopo nodes: %d lines, want a head and one per GPU", lines)
	}

	// kubectl gputopo report, under the same role: the cluster's page,
	// with a pod that cannot fit pending and its reasons.
	c.create(gpuTemplate(ns, "nine-gpus", agentDriver, 9), podWithTemplate(ns, "huge", "nine-gpus", "gputopo-scheduler"))
	c.waitFor("huge refused", 30*time.Second, func() (bool, error) { return c.schedulingMessage(ns, "huge") != "", nil })
	page := filepath.Join(t.TempDir(), "fleet.html")
	out, err = exec.CommandContext(c.ctx, kubectlBinary, "report", "--out", page, "--kubeconfig", viewer).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl gputopo report: %v\n%s", err, out)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl gputopo report: %s, %d bytes; tables:\n%s", out, len(html), tableText(string(html)))
	for _, want := range []string{"tray-0", "tray-1", "Fleet fragmentation", "default/huge", "cannot allocate all claims", "GPUs free</td><td>5"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("kubectl gputopo report lacks %q", want)
		}
	}
	scheduler.stop(syscall.SIGTERM)
}

// tableText is the text of an HTML page's table rows, one per line, for
// the log.
func tableText(page string) string {
	var b strings.Builder
	for _, row := range strings.Split(page, "<tr>")[1:] {
		row, _, _ = strings.Cut(row, "</tr>")
		cells := strings.NewReplacer("</td><td>", " | ", "</th><th>", " | ").Replace(row)
		for strings.Contains(cells, "<") {
			i := strings.Index(cells, "<")
			j := strings.Index(cells[i:], ">")
			if j < 0 {
				break
			}
			cells = cells[:i] + cells[i+j+1:]
		}
		b.WriteString(strings.TrimSpace(cells) + "\n")
	}
	return b.String()
}
