package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
	"github.com/gputopo/gputopo/pkg/topology"
)

const agentUser = "system:serviceaccount:gputopo-system:gputopo-nodeagent"

// agentClient is the node agent's client as the DaemonSet's pod on node
// has it (agentConfig): a real service account token, never
// impersonation, so that the audit log sees every request (the API server
// applies the audit policy to the impersonating user).
func (c *cluster) agentClient(node string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(c.agentConfig(node))
}

// agentProbeClient is agentClient for requests a test makes to show they
// are refused: the audit check leaves them out (probeUserAgent), as they
// are no request of the product's.
func (c *cluster) agentProbeClient(node string) kubernetes.Interface {
	cfg := c.agentConfig(node)
	cfg.UserAgent = probeUserAgent
	return kubernetes.NewForConfigOrDie(cfg)
}

type simNode struct {
	name  string
	shape mocknvml.Shape
	mode  config.Mode
	rack  string
}

// startAgent runs a node agent in mock mode for the node, with the
// manifests' RBAC and admission policy applying to it.
func (c *cluster) startAgent(n simNode) (*agent.Agent, *mocknvml.Server) {
	c.t.Helper()
	lib := mockGPUs(c.t, n)
	a := c.startAgentOn(n, lib, c.t.TempDir())
	c.t.Cleanup(a.Stop)
	return a, lib
}

// mockGPUs are mock GPUs of the node's shape (the same UUIDs for the same
// node name), in MIG mode when the node's mode is MIG.
func mockGPUs(t *testing.T, n simNode) *mocknvml.Server {
	t.Helper()
	lib, err := mocknvml.NewWith(n.shape, mocknvml.Options{Name: n.name, Rack: n.rack, MIG: n.mode == config.MIG})
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// startAgentOn runs the agent on given GPUs with its state (checkpoint,
// sockets, CDI specs) in dir, as a restarted agent finds them, with the
// configuration of the applied ConfigMap but for the node's mode and a
// quick recovery from health events.
func (c *cluster) startAgentOn(n simNode, lib *mocknvml.Server, dir string) *agent.Agent {
	c.t.Helper()
	cfg := c.shippedAgentConfig()
	cfg.DefaultMode = n.mode
	cfg.Health.RecoverAfter = metav1.Duration{Duration: time.Second}
	a, err := agent.Start(c.ctx, agent.Options{
		NodeName: n.name, Config: cfg, NVML: lib, KubeClient: c.agentClient(n.name),
		PluginDir: filepath.Join(dir, "plugin"), RegistrarDir: filepath.Join(dir, "registry"), CDIDir: filepath.Join(dir, "cdi"),
		ProbeInterval: 50 * time.Millisecond,
	})
	if err != nil {
		c.t.Fatalf("agent of %s: %v", n.name, err)
	}
	return a
}

// replaceAgentConfigMap replaces the node agent's ConfigMap with the one
// in file, as kubectl apply -k of an overlay (or of the base again) does;
// agents started later read it.
func (c *cluster) replaceAgentConfigMap(file string) {
	c.t.Helper()
	if err := c.client.CoreV1().ConfigMaps(agentNamespace).Delete(c.ctx, agentDaemonSet, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.apply(file, "")
}

// editAgentConfigMap replaces from with to in the node agent's
// configuration, as an operator edits the ConfigMap; agents started
// later read it.
func (c *cluster) editAgentConfigMap(from, to string) {
	c.t.Helper()
	cms := c.client.CoreV1().ConfigMaps(agentNamespace)
	cm, err := cms.Get(c.ctx, agentDaemonSet, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	data := cm.Data["nodeagent.yaml"]
	if !strings.Contains(data, from) {
		c.t.Fatalf("the node agent's configuration has no %q:\n%s", from, data)
	}
	cm.Data["nodeagent.yaml"] = strings.Replace(data, from, to, 1)
	if _, err := cms.Update(c.ctx, cm, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// shippedAgentConfig is the node agent's configuration as the applied
// ConfigMap of manifests/nodeagent gives it, read and checked as the
// agent reads its --config.
func (c *cluster) shippedAgentConfig() config.Config {
	c.t.Helper()
	cfg, err := config.Load(c.agentConfigFile(c.t.TempDir()))
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// agentConfigFile writes the applied ConfigMap's configuration into dir
// as the DaemonSet mounts it, and returns its path (the agent's
// --config).
func (c *cluster) agentConfigFile(dir string) string {
	c.t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps(agentNamespace).Get(c.ctx, agentDaemonSet, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("the node agent's ConfigMap (apply manifests/nodeagent first): %v", err)
	}
	path := filepath.Join(dir, "nodeagent.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["nodeagent.yaml"]), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// nodeDevices are the devices the API server holds for a node's pool.
func (c *cluster) nodeDevices(node string) []resourceapi.Device {
	list, err := c.client.ResourceV1().ResourceSlices().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []resourceapi.Device
	for _, s := range list.Items {
		if ptr.Deref(s.Spec.NodeName, "") == node {
			out = append(out, s.Spec.Devices...)
		}
	}
	return out
}

// poolDevices counts the devices the API server holds for a node's pool.
func (c *cluster) poolDevices(node string) (devices, tainted int) {
	for _, d := range c.nodeDevices(node) {
		devices++
		if len(d.Taints) > 0 {
			tainted++
		}
	}
	return devices, tainted
}

// checkTaintsStampedByTheAPIServer checks that every taint of the node's
// slices has a time added, which the agent leaves to the API server: the
// eviction controller counts tolerationSeconds from it.
func (c *cluster) checkTaintsStampedByTheAPIServer(node string) {
	for _, d := range c.nodeDevices(node) {
		for _, taint := range d.Taints {
			if taint.TimeAdded == nil || time.Since(taint.TimeAdded.Time).Abs() > time.Minute {
				c.t.Errorf("%s: taint %s added %v, want the API server's time of publishing", d.Name, taint.Key, taint.TimeAdded)
			}
		}
	}
}

// Node agents in mock mode publish through the real API server (its
// validation, the manifests' RBAC and admission policy), the scheduler
// allocates from their slices, the agents prepare what it allocated, and
// a GPU error keeps new claims off the GPU until it recovers.
func TestNodeAgentsWithTheScheduler(t *testing.T) {
	c := startCluster(t)
	c.apply("../../manifests/nodeagent", "")
	c.deviceClasses()
	nodes := []simNode{
		{"dgx-h100", mocknvml.DGXH100, config.Whole, ""},
		{"pcie-pairs", mocknvml.PCIePairs, config.Whole, ""},
		{"a100-mig", mocknvml.DGXA100, config.MIG, ""},
		{"h100-mig", mocknvml.DGXH100, config.MIG, ""},
		{"gb200-1", mocknvml.GB200Tray, config.Whole, "rack-1"},
		{"gb200-2", mocknvml.GB200Tray, config.Whole, "rack-1"},
		{"h200-shared", mocknvml.DGXH200, config.Shared, ""},
	}
	agents := map[string]*agent.Agent{}
	libs := map[string]*mocknvml.Server{}
	for _, n := range nodes {
		c.node(n.name, nil)
		agents[n.name], libs[n.name] = c.startAgent(n)
	}
	for _, n := range nodes {
		want := len(agents[n.name].Layout().Devices)
		c.waitFor("slices of "+n.name, 30*time.Second, func() (bool, error) {
			got, _ := c.poolDevices(n.name)
			return got == want, nil
		})
	}

	t.Run("admission policy keeps agents to their node", func(t *testing.T) {
		other := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "forged"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To("pcie-pairs"),
				Pool: resourceapi.ResourcePool{Name: "pcie-pairs", ResourceSliceCount: 1}},
		}
		fromDGX := c.agentProbeClient("dgx-h100")
		// The policy takes effect once the API server has loaded it.
		c.waitFor("forged slice denied", 30*time.Second, func() (bool, error) {
			_, err := fromDGX.ResourceV1().ResourceSlices().Create(c.ctx, other, metav1.CreateOptions{})
			if err == nil {
				_ = c.client.ResourceV1().ResourceSlices().Delete(c.ctx, "forged", metav1.DeleteOptions{})
				return false, nil
			}
			if !strings.Contains(err.Error(), "the node agent of node dgx-h100 may not write ResourceSlices of node pcie-pairs") {
				return false, fmt.Errorf("unexpected error: %w", err)
			}
			return true, nil
		})
		list, err := c.client.ResourceV1().ResourceSlices().List(c.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			if ptr.Deref(s.Spec.NodeName, "") == "pcie-pairs" {
				if err := fromDGX.ResourceV1().ResourceSlices().Delete(c.ctx, s.Name, metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "may not write") {
					t.Errorf("agent of dgx-h100 deleting a slice of pcie-pairs: %v", err)
				}
				break
			}
		}
		// Its own node, another node's pool and device names.
		reused := other.DeepCopy()
		reused.Name, reused.Spec.NodeName = "reused-pool", ptr.To("dgx-h100")
		if _, err := fromDGX.ResourceV1().ResourceSlices().Create(c.ctx, reused, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "may publish only its own pool dgx-h100, not pool pcie-pairs") {
			t.Errorf("agent of dgx-h100 publishing into the pool of pcie-pairs: %v", err)
		}
		// Its own node and pool, another driver (other kubelet plugins
		// name their pools after the node too).
		foreign := other.DeepCopy()
		foreign.Name, foreign.Spec.Driver = "foreign-driver", "nic.example.com"
		foreign.Spec.NodeName, foreign.Spec.Pool.Name = ptr.To("dgx-h100"), "dgx-h100"
		if _, err := fromDGX.ResourceV1().ResourceSlices().Create(c.ctx, foreign, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "may write only ResourceSlices of driver gpu.nvidia.com, not of driver nic.example.com") {
			t.Errorf("agent of dgx-h100 publishing a slice of another driver: %v", err)
		}
		if _, err := c.agentProbeClient("").ResourceV1().ResourceSlices().Create(c.ctx, other, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "no node in the request's credentials") {
			t.Errorf("agent without a node: %v", err)
		}
		// Least privilege: the agent cannot touch what it does not need.
		if _, err := fromDGX.ResourceV1().DeviceClasses().List(c.ctx, metav1.ListOptions{}); err == nil {
			t.Error("the agent's service account can list DeviceClasses")
		}
	})

	c.startSchedulerWith(gputopoOnly)
	const ns = "default"
	// The DRA article's templates, as shipped in manifests/examples.
	c.apply("../../manifests/examples", ns)
	c.create(
		withSelector(gpuTemplate(ns, "tp8-h100", "gpu.nvidia.com", 8), "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"),
		withSelector(gpuTemplate(ns, "pair-nvl", "gpu.nvidia.com", 2), "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 NVL'"),
		withSelector(gpuTemplate(ns, "gb200-4", "gpu.nvidia.com", 4), "has(device.attributes['gpu.nvidia.com'].cliqueID)"),
		// The DRA article's selector: an int memory attribute in MiB.
		withSelector(gpuTemplate(ns, "big-memory", "gpu.nvidia.com", 1), "device.attributes['gpu.nvidia.com'].memory >= 180000"),
		migTemplate(ns, "3g.20gb"), migTemplate(ns, "1g.5gb"),
		sharedTemplate(ns, "share-12gi", "12Gi"),
	)
	c.create(
		podWithTemplate(ns, "tp8", "tp8-h100", "gputopo-scheduler"),
		podWithTemplate(ns, "pair", "pair-nvl", "gputopo-scheduler"),
		podWithTemplate(ns, "gb200", "gb200-4", "gputopo-scheduler"),
		podWithTemplate(ns, "big", "big-memory", "gputopo-scheduler"),
		podWithTemplate(ns, "mig-3g", "mig-3g20gb", "gputopo-scheduler"),
		podWithTemplate(ns, "mig-1g", "mig-1g5gb", "gputopo-scheduler"),
		podWithTemplate(ns, "share-a", "share-12gi", "gputopo-scheduler"),
		podWithTemplate(ns, "share-b", "share-12gi", "gputopo-scheduler"),
		podWithTemplate(ns, "article-gpu", "gpu-claim-template", "gputopo-scheduler"),
		podWithTemplate(ns, "article-mig", "mig-partition-template", "gputopo-scheduler"),
		// A pod without claims goes through gputopo's profile too.
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cpu-only"}, Spec: v1.PodSpec{SchedulerName: "gputopo-scheduler",
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
	)
	c.waitScheduled(ns, "cpu-only")
	pods := c.waitScheduled(ns, "tp8", "pair", "gb200", "big", "mig-3g", "mig-1g", "share-a", "share-b", "article-gpu", "article-mig")
	byPod := c.devicesByPod(ns)
	wantNode := map[string]string{"tp8": "dgx-h100", "pair": "pcie-pairs", "mig-3g": "a100-mig", "mig-1g": "a100-mig", "share-a": "h200-shared", "share-b": "h200-shared"}
	for pod, node := range wantNode {
		if pods[pod].Spec.NodeName != node {
			t.Errorf("pod %s on %s, want %s", pod, pods[pod].Spec.NodeName, node)
		}
	}
	// 1g.10gb: the double-memory 1g of the A100 40GB or the plain 1g of the H100.
	if d := byPod["article-mig"]; len(d) != 1 || !strings.Contains(d[0], "-mig-1g10gb-") {
		t.Errorf("article's MIG claim got %v, want a 1g.10gb partition", d)
	}
	if n := pods["gb200"].Spec.NodeName; !strings.HasPrefix(n, "gb200-") {
		t.Errorf("GB200 pod on %s", n)
	}
	if got := c.linkClass(byPod["pair"]); got != topology.LinkNVLink {
		t.Errorf("2 GPUs on the NVLink-pair node: link class %s (%v), want nvlink", got, byPod["pair"])
	}
	if got := c.linkClass(byPod["tp8"]); got != topology.LinkNVLink {
		t.Errorf("8 GPUs on the DGX: link class %s, want nvlink (NVSwitch)", got)
	}
	if byPod["share-a"][0] != byPod["share-b"][0] {
		t.Errorf("shares on %v and %v: want packed on one GPU", byPod["share-a"], byPod["share-b"])
	}
	c.checkNoDoubleBooking()

	// The kubelet's part: each node's agent prepares what was allocated
	// there; MIG partitions become GPU instances on the (mock) GPU.
	for name, pod := range pods {
		claim := c.claimOf(pod, "dev")
		res, err := agents[pod.Spec.NodeName].PrepareResourceClaims(c.ctx, []*resourceapi.ResourceClaim{claim})
		if err != nil || res[claim.UID].Err != nil {
			t.Fatalf("prepare %s on %s: %v %v", name, pod.Spec.NodeName, err, res[claim.UID].Err)
		}
	}
	instances := 0
	for _, node := range []string{"a100-mig", "h100-mig"} {
		for i := range libs[node].Devices {
			instances += libs[node].GPUInstances(i)
		}
	}
	if instances != 3 {
		t.Errorf("%d MIG GPU instances after preparing three MIG claims, want 3", instances)
	}

	// The kubelet's unprepare when the pod is gone: the agent releases
	// the GPUs. (Health, from Xids to taints and back, is in
	// TestNodeAgentProcess, with the agent a process shown the Xids
	// through its --mock-faults file.)
	tp8 := c.claimOf(pods["tp8"], "dev")
	if err := c.client.CoreV1().Pods(ns).Delete(c.ctx, "tp8", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if res, err := agents["dgx-h100"].UnprepareResourceClaims(c.ctx, []kubeletplugin.NamespacedObject{{UID: tp8.UID}}); err != nil || res[tp8.UID] != nil {
		t.Fatalf("unprepare tp8: %v %v", err, res[tp8.UID])
	}
	for _, cl := range agents["dgx-h100"].Preparer().Claims() {
		if cl.UID == string(tp8.UID) {
			t.Errorf("the DGX's agent still holds tp8's claim after its unprepare: %+v", cl)
		}
	}
}

// An operator switches a node's GPUs from MIG to whole GPUs: MIG mode
// off, the base manifests applied over the MIG overlay, the agent
// restarted. The pool shrinks to one device per GPU in one slice, the
// agent deleting the slices it no longer needs, under its own service
// account and admission policy. The agents are processes, as the
// DaemonSet runs them, each on the state the one before left.
func TestNodeAgentModeChangeShrinksPool(t *testing.T) {
	c := startCluster(t)
	c.apply("../../manifests/nodeagent", "")
	c.replaceAgentConfigMap("../../manifests/nodeagent-mig/configmap.yaml")
	const node = "a100"
	c.node(node, nil)
	pool := func() (slices, devices int) {
		list, err := c.client.ResourceV1().ResourceSlices().List(c.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			if ptr.Deref(s.Spec.NodeName, "") == node {
				slices++
				devices += len(s.Spec.Devices)
			}
		}
		return slices, devices
	}
	waitPool := func(what string, a *agentProcess, done func(slices, devices int) bool) {
		c.waitFor(what, 60*time.Second, func() (bool, error) {
			if exited, state := a.exited(); exited {
				t.Fatalf("node agent exited: %s\n%s", state, tail(a.log, 40))
			}
			return done(pool()), nil
		})
	}
	dir := t.TempDir()
	mig := c.runAgentProcessIn(dir, node, string(mocknvml.DGXA100), "--mock-mig")
	var before int
	waitPool("MIG pool published", mig, func(slices, devices int) bool {
		before = slices
		return slices > 1 && devices > 8
	})
	mig.stop(syscall.SIGTERM)

	c.replaceAgentConfigMap("../../manifests/nodeagent/configmap.yaml")
	whole := c.runAgentProcessIn(dir, node, string(mocknvml.DGXA100))
	waitPool("pool of 8 whole GPUs in one slice", whole, func(slices, devices int) bool {
		return slices == 1 && devices == 8
	})
	t.Logf("pool of %s: %d slices in MIG mode, 1 with whole GPUs", node, before)
}
