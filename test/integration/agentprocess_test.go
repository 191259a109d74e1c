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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

const (
	agentNamespace = "gputopo-system"
	agentDaemonSet = "gputopo-nodeagent"
	// agentServiceAccount is the DaemonSet pods' service account.
	agentServiceAccount = "gputopo-nodeagent"
	agentDriver         = "gpu.nvidia.com"
)

// agentProcess is a node agent binary running for one node, with the
// directories a DaemonSet pod mounts from the host.
type agentProcess struct {
	*process
	pluginDir, registrarDir, cdiDir string
}

// runAgentProcess runs cmd/nodeagent for node as the DaemonSet of
// manifests/nodeagent does: a pod of its template bound to the node
// (created here, as the DaemonSet controller would), a service account
// token bound to that pod (so it carries the node's name, as the
// kubelet's projected token does), the ConfigMap's configuration, and
// mock NVML of the given shape instead of the driver's library.
func (c *cluster) runAgentProcess(node, shape string, extraFlags ...string) *agentProcess {
	c.t.Helper()
	return c.runAgentProcessIn(c.t.TempDir(), node, shape, extraFlags...)
}

// runAgentProcessIn is runAgentProcess with the host's directories (and
// the configuration file) under dir, where an agent restarted on the
// node finds what its predecessor left.
func (c *cluster) runAgentProcessIn(dir, node, shape string, extraFlags ...string) *agentProcess {
	c.t.Helper()
	cfg := c.agentConfig(node)
	configPath := c.agentConfigFile(dir)
	a := &agentProcess{pluginDir: filepath.Join(dir, "plugin"), registrarDir: filepath.Join(dir, "registry"), cdiDir: filepath.Join(dir, "cdi")}
	for _, d := range []string{a.pluginDir, a.registrarDir, a.cdiDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			c.t.Fatal(err)
		}
	}
	kubeconfig := writeKubeconfig(c.t, cfg)
	c.wantIdentity(kubeconfig, "system:serviceaccount:"+agentNamespace+":"+agentServiceAccount)
	args := append([]string{"--node-name=" + node, "--config=" + configPath, "--nvml=mock:" + shape,
		"--kubeconfig=" + kubeconfig,
		"--plugin-dir=" + a.pluginDir, "--registrar-dir=" + a.registrarDir, "--cdi-dir=" + a.cdiDir,
		"--health-probe-interval=200ms", "--v=4"}, extraFlags...)
	a.process = c.runBinary("nodeagent-"+node, agentBinary, args...)
	return a
}

// agentConfig is the node agent's service account as the DaemonSet's pod
// on node has it: a token bound to that pod, so that it carries the
// node's name, as the kubelet's projected token does. For node "" the
// token is bound to no pod: no node in the credentials. One token per
// node and cluster: an agent restarted on the node is the same pod's.
func (c *cluster) agentConfig(node string) *rest.Config {
	c.t.Helper()
	if cfg, ok := c.agentConfigs[node]; ok {
		return rest.CopyConfig(cfg)
	}
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}
	if node != "" {
		pod := c.daemonSetPod(node)
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := c.client.CoreV1().ServiceAccounts(agentNamespace).CreateToken(c.ctx, agentServiceAccount, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("token of the node agent on %q: %v", node, err)
	}
	cfg := rest.AnonymousClientConfig(c.config)
	cfg.QPS, cfg.Burst = c.config.QPS, c.config.Burst
	cfg.BearerToken = tr.Status.Token
	c.agentConfigs[node] = cfg
	return rest.CopyConfig(cfg)
}

// daemonSetPod creates the pod the DaemonSet controller would create on
// node from the applied DaemonSet's template.
func (c *cluster) daemonSetPod(node string) *v1.Pod {
	c.t.Helper()
	ds, err := c.client.AppsV1().DaemonSets(agentNamespace).Get(c.ctx, agentDaemonSet, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("the manifests' DaemonSet: %v", err)
	}
	// The template runs under the NVIDIA container runtime; the
	// RuntimeClass admission plugin wants it to exist.
	if rc := ds.Spec.Template.Spec.RuntimeClassName; rc != nil {
		c.ensureRuntimeClass(*rc)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ds.Name + "-", Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	pod, err = c.client.CoreV1().Pods(ds.Namespace).Create(c.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("the DaemonSet's pod on %s: %v", node, err)
	}
	return pod
}

// dial connects to one of the agent's Unix sockets as the kubelet does.
func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", socket, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestNodeAgentProcess installs the node agent as the docs do (the
// manifests, then the DaemonSet's pod on a GPU node) and runs it as its
// own process under its service account: it publishes the node's GPUs,
// registers with the kubelet over the registration socket, and prepares
// and unprepares what gputopo's scheduler (another process) allocated,
// driven over the DRA socket as the kubelet drives it.
func TestNodeAgentProcess(t *testing.T) {
	c := startCluster(t)
	c.apply("../../manifests/nodeagent", "")
	c.deviceClasses()
	const node = "dgx-h100"
	c.node(node, map[string]string{"nvidia.com/gpu.present": "true"})
	// Taints lifted a second after the last Xid, not five minutes, as an
	// operator may configure it.
	c.editAgentConfigMap("recoverAfter: 5m", "recoverAfter: 1s")
	faults := filepath.Join(t.TempDir(), "faults")
	agent := c.runAgentProcess(node, "dgxh100", "--mock-faults="+faults)
	c.waitFor("slices of "+node, 60*time.Second, func() (bool, error) {
		if done, state := agent.exited(); done {
			t.Fatalf("node agent exited: %s\n%s", state, tail(agent.log, 40))
		}
		got, _ := c.poolDevices(node)
		return got == 8, nil
	})

	t.Run("registration", func(t *testing.T) {
		socket := filepath.Join(agent.registrarDir, agentDriver+"-reg.sock")
		reg := registerapi.NewRegistrationClient(dial(t, socket))
		info, err := reg.GetInfo(c.ctx, &registerapi.InfoRequest{})
		if err != nil {
			t.Fatalf("GetInfo: %v", err)
		}
		if info.Type != registerapi.DRAPlugin || info.Name != agentDriver || info.Endpoint != filepath.Join(agent.pluginDir, "dra.sock") {
			t.Errorf("plugin info %+v: want a %s plugin named %s at %s", info, registerapi.DRAPlugin, agentDriver, filepath.Join(agent.pluginDir, "dra.sock"))
		}
		if !slices.Contains(info.SupportedVersions, drapb.DRAPluginService) {
			t.Errorf("supported versions %v: want %s", info.SupportedVersions, drapb.DRAPluginService)
		}
		if _, err := reg.NotifyRegistrationStatus(c.ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
			t.Errorf("NotifyRegistrationStatus: %v", err)
		}
	})

	c.startSchedulerWith(gputopoOnly)
	const ns = "default"
	c.create(gpuTemplate(ns, "two-gpus", agentDriver, 2), podWithTemplate(ns, "pair", "two-gpus", "gputopo-scheduler"))
	pod := c.waitScheduled(ns, "pair")["pair"]
	claim := c.claimOf(pod, "dev")
	results := claim.Status.Allocation.Devices.Results
	if len(results) != 2 {
		t.Fatalf("claim %s: %d devices allocated, want 2", claim.Name, len(results))
	}

	dra := drapb.NewDRAPluginClient(dial(t, filepath.Join(agent.pluginDir, "dra.sock")))
	c.prepareAndUnprepare(dra, agent, claim)

	// A pod that asks for nvidia.com/gpu: 2 (the extended-resource
	// overlay's class): the scheduler makes its claim, the agent prepares
	// it like any other and the runtime finds its CDI devices.
	c.patchExtendedResourceName()
	c.create(extendedPod(ns, "plain", "nvidia.com/gpu", "gputopo-scheduler", node, 2))
	plain := c.waitScheduled(ns, "plain")["plain"]
	var extended *resourceapi.ResourceClaim
	c.waitFor("extended resource claim of plain", 30*time.Second, func() (bool, error) {
		extended = c.extendedClaimOf(plain)
		return extended != nil && extended.Status.Allocation != nil, nil
	})
	if n := len(extended.Status.Allocation.Devices.Results); n != 2 {
		t.Fatalf("claim %s: %d devices allocated, want 2", extended.Name, n)
	}
	c.prepareAndUnprepare(dra, agent, extended)

	// kubectl gputopo nodes, under the read-only role of manifests/kubectl,
	// shows the agent's GPUs and what holds them.
	viewer := c.serviceAccountKubeconfig("gputopo-system", "gputopo-viewer", "../../manifests/kubectl")
	out, err := exec.CommandContext(c.ctx, kubectlBinary, "nodes", "--kubeconfig", viewer, "--node", node).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl gputopo nodes: %v\n%s", err, out)
	}
	t.Logf("kubectl gputopo nodes:\n%s", out)
	for _, want := range []string{"NVLINK DOMAIN", "nvlink ", "claim " + ns + "/" + claim.Name + " for pod " + ns + "/pair", "claim " + ns + "/" + extended.Name + " for pod " + ns + "/plain", "free"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl gputopo nodes lacks %q", want)
		}
	}
	if lines := strings.Count(string(out), "\n"); lines != 1+8 {
		t.Errorf("kubectl gputopo nodes: %d lines, want a head and one per GPU", lines)
	}

	// kubectl gputopo why: a bound pod's devices and why, a pending pod's
	// reasons.
	c.create(extendedPod(ns, "huge", "nvidia.com/gpu", "gputopo-scheduler", node, 9))
	c.waitFor("huge refused", 30*time.Second, func() (bool, error) { return c.schedulingMessage(ns, "huge") != "", nil })
	for pod, wants := range map[string][]string{
		"plain": {"pod default/plain is bound to node " + node, "claim " + extended.Name + ":", "request container-0-request-0: 2 of class gpu.nvidia.com", "allocated: ", "why these: allocated"},
		"huge":  {"pod default/huge is pending (scheduler gputopo-scheduler)", "Unschedulable:", "0/1 nodes are available:"},
	} {
		out, err := exec.CommandContext(c.ctx, kubectlBinary, "why", pod, "-n", ns, "--kubeconfig", viewer).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl gputopo why %s: %v\n%s", pod, err, out)
		}
		t.Logf("kubectl gputopo why %s:\n%s", pod, out)
		for _, want := range wants {
			if !strings.Contains(string(out), want) {
				t.Errorf("kubectl gputopo why %s lacks %q", pod, want)
			}
		}
	}

	c.xidsTaintAndRecover(node, faults)
	c.devicePluginTaints(node)

	// A DaemonSet rollout or node drain stops the pod with SIGTERM.
	agent.stop(syscall.SIGTERM)
	if done, state := agent.exited(); !done || !strings.Contains(state, "exit status 0") {
		t.Errorf("agent after SIGTERM: %s\n%s", state, tail(agent.log, 20))
	}
}

// devicePluginTaints: a device plugin that starts advertising the node's
// GPUs gets every device tainted, in slices the API server accepts; the
// taint goes when it stops.
func (c *cluster) devicePluginTaints(node string) {
	c.t.Helper()
	c.advertise(node, "nvidia.com/gpu", 8)
	c.waitFor("every device tainted for the device plugin", 30*time.Second, func() (bool, error) {
		devices, tainted := c.poolDevices(node)
		return devices == 8 && tainted == 8, nil
	})
	c.checkTaintsStampedByTheAPIServer(node)
	c.advertise(node, "nvidia.com/gpu", 0)
	c.waitFor("the device plugin's taint lifted", 30*time.Second, func() (bool, error) {
		devices, tainted := c.poolDevices(node)
		return devices == 8 && tainted == 0, nil
	})
}

// xidsTaintAndRecover: Xids on every GPU of the node but one that is
// free (written to the agent's --mock-faults file, as the driver would
// report them) taint them; a new 1-GPU pod for the node lands on the
// healthy GPU, the next one waits until the errors stop and the taints
// are lifted.
func (c *cluster) xidsTaintAndRecover(node, faults string) {
	t := c.t
	t.Helper()
	const ns = "default"
	held := map[string]bool{}
	for _, devices := range c.devicesByPod(ns) {
		for _, d := range devices {
			held[d] = true
		}
	}
	healthy := -1
	for i := range 8 {
		if !held[fmt.Sprintf("%s/gpu-%d", node, i)] { // pool/device
			healthy = i
			break
		}
	}
	if healthy < 0 {
		t.Fatalf("no free GPU on %s: %v", node, held)
	}
	ctx, stopErrors := context.WithCancel(c.ctx)
	defer stopErrors()
	go func() {
		f, err := os.OpenFile(faults, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for ctx.Err() == nil {
			for i := range 8 {
				if i != healthy {
					fmt.Fprintf(f, "xid %d 92\n", i) // NoSchedule; lifted a second after the last
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	c.waitFor("7 GPUs tainted", 30*time.Second, func() (bool, error) {
		_, tainted := c.poolDevices(node)
		return tainted == 7, nil
	})
	c.checkTaintsStampedByTheAPIServer(node)
	c.create(gpuTemplate(ns, "one-gpu", "gpu.nvidia.com", 1))
	c.create(podOn(ns, "h1", "one-gpu", "gputopo-scheduler", node))
	h1 := c.waitScheduled(ns, "h1")["h1"]
	if got := devicesOf(c.claimOf(h1, "dev")); len(got) != 1 || got[0] != fmt.Sprintf("gpu-%d", healthy) {
		t.Errorf("h1 got %v, want the healthy gpu-%d", got, healthy)
	}
	c.create(podOn(ns, "h2", "one-gpu", "gputopo-scheduler", node))
	c.waitFor("h2 pending", 30*time.Second, func() (bool, error) {
		return c.schedulingMessage(ns, "h2") != "", nil
	})
	t.Logf("h2 pending while 7 GPUs are tainted: %s", c.schedulingMessage(ns, "h2"))
	stopErrors()
	c.waitFor("taints lifted", 30*time.Second, func() (bool, error) {
		_, tainted := c.poolDevices(node)
		return tainted == 0, nil
	})
	c.waitScheduled(ns, "h2")
	c.checkNoDoubleBooking()
}

// ensureRuntimeClass creates the RuntimeClass, as installing NVIDIA's
// container toolkit does (docs/install.md's requirements).
func (c *cluster) ensureRuntimeClass(name string) {
	c.t.Helper()
	_, err := c.client.NodeV1().RuntimeClasses().Create(c.ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatal(err)
	}
}

// prepareAndUnprepare prepares the claim through the agent's kubelet
// plugin socket as the kubelet does, checks that the container runtime
// finds a CDI device for every allocated device, and unprepares it.
func (c *cluster) prepareAndUnprepare(dra drapb.DRAPluginClient, agent *agentProcess, claim *resourceapi.ResourceClaim) {
	t := c.t
	t.Helper()
	results := claim.Status.Allocation.Devices.Results
	uid := string(claim.UID)
	ref := []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: uid}}
	prep, err := dra.NodePrepareResources(c.ctx, &drapb.NodePrepareResourcesRequest{Claims: ref})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	got := prep.Claims[uid]
	if got == nil || got.Error != "" {
		t.Fatalf("prepare claim %s: %+v\n%s", claim.Name, got, tail(agent.log, 40))
	}
	runtime := cdiRuntime(t, agent.cdiDir)
	var prepared []string
	for _, d := range got.Devices {
		if len(d.CdiDeviceIds) == 0 {
			t.Errorf("device %s/%s prepared without a CDI device", d.PoolName, d.DeviceName)
		}
		// A pod's extended-resource claim: each device also names the
		// visibility device of its container.
		if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" && len(d.CdiDeviceIds) != 2 {
			t.Errorf("device %s/%s of extended-resource claim %s has CDI devices %v, want its own and its container's", d.PoolName, d.DeviceName, claim.Name, d.CdiDeviceIds)
		}
		// The container runtime resolves each ID from the CDI directory.
		for _, id := range d.CdiDeviceIds {
			if runtime.GetDevice(id) == nil {
				t.Errorf("CDI device %s of %s is in no spec of %s (it has %v)", id, d.DeviceName, agent.cdiDir, runtime.ListDevices())
			}
		}
		prepared = append(prepared, d.DeviceName)
	}
	for _, r := range results {
		if !slices.Contains(prepared, r.Device) {
			t.Errorf("allocated device %s not prepared (prepared %v)", r.Device, prepared)
		}
	}

	unprep, err := dra.NodeUnprepareResources(c.ctx, &drapb.NodeUnprepareResourcesRequest{Claims: ref})
	if err != nil || unprep.Claims[uid] == nil || unprep.Claims[uid].Error != "" {
		t.Fatalf("unprepare claim %s: %v %+v", claim.Name, err, unprep)
	}
	if left := cdiRuntime(t, agent.cdiDir).ListDevices(); len(left) > 0 {
		t.Errorf("CDI devices left after unprepare: %v", left)
	}
}

// cdiRuntime reads the CDI directory as a container runtime does.
func cdiRuntime(t *testing.T, dir string) *cdi.Cache {
	t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("CDI specs in %s: %v", dir, err)
	}
	return cache
}
