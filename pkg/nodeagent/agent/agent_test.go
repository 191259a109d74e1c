package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func allocated(name, device string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Device: device}},
		}}},
	}
}

// The kubelet's side of the plugin, over the agent's real sockets:
// registration, prepare, unprepare and the health stream.
func TestKubeletPluginOverItsSockets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1", MIG: true})
	if err != nil {
		t.Fatal(err)
	}
	client := fakeAPI(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}},
		allocated("a", "gpu-0-mig-3g40gb-4"), allocated("b", "gpu-0-mig-4g40gb-0"), allocated("c", "gpu-0-mig-1g10gb-5"),
	)
	cfg := config.Default()
	cfg.DefaultMode = config.MIG
	dir := t.TempDir()
	o := testOptions("node-1", cfg, lib, client, dir)
	o.ProbeInterval = 10 * time.Millisecond
	a, err := agent.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()

	reg := registerapi.NewRegistrationClient(dial(t, filepath.Join(dir, "registry", "gpu.nvidia.com-reg.sock")))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != "gpu.nvidia.com" || !strings.HasSuffix(info.Endpoint, "dra.sock") {
		t.Errorf("registration info %+v", info)
	}

	dra := drapbv1.NewDRAPluginClient(dial(t, info.Endpoint))
	ref := func(name string) *drapbv1.Claim {
		return &drapbv1.Claim{Namespace: "team", Name: name, Uid: "uid-" + name}
	}
	resp, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{ref("a"), ref("b"), ref("c")}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Claims["uid-a"]; r.Error != "" || len(r.Devices) != 1 || r.Devices[0].DeviceName != "gpu-0-mig-3g40gb-4" ||
		r.Devices[0].CdiDeviceIds[0] != "k8s.gpu.nvidia.com/claim=uid-a-gpu-0-mig-3g40gb-4" {
		t.Errorf("claim a: %v", r)
	}
	if r := resp.Claims["uid-b"]; r.Error != "" {
		t.Errorf("claim b (4g at 0, beside a's 3g at 4): %v", r.Error)
	}
	if r := resp.Claims["uid-c"]; !strings.Contains(r.Error, "team/a (uid-a)") || !strings.Contains(r.Error, "team/c (uid-c)") {
		t.Errorf("claim c overlaps a: error %q, want both claims named", r.Error)
	}
	un, err := dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{ref("a"), ref("never-prepared")}})
	if err != nil {
		t.Fatal(err)
	}
	for uid, r := range un.Claims {
		if r.Error != "" {
			t.Errorf("unprepare %s: %s", uid, r.Error)
		}
	}
	if n := len(a.Preparer().Claims()); n != 1 {
		t.Errorf("%d claims prepared after unprepare, want b only", n)
	}

	// Slices published through the resourceslice controller.
	waitSlices := func(what string, ok func([]resourceapi.ResourceSlice) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err == nil && ok(list.Items) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d slices", what, len(list.Items))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	devices := func(slices []resourceapi.ResourceSlice) (n, tainted int) {
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				n++
				if len(d.Taints) > 0 {
					tainted++
				}
			}
		}
		return
	}
	waitSlices("published", func(s []resourceapi.ResourceSlice) bool { n, _ := devices(s); return n == 8*19 })

	// Health: an Xid taints GPU 6's devices in the slices and reaches the
	// kubelet's health stream.
	stream, err := drahealthv1.NewDRAResourceHealthClient(dial(t, info.Endpoint)).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Devices) != 8*19 {
		t.Errorf("health report of %d devices, want %d", len(first.Devices), 8*19)
	}
	for !lib.Registered(6) {
		time.Sleep(time.Millisecond)
	}
	lib.InjectXid(6, 48)
	waitSlices("tainted", func(s []resourceapi.ResourceSlice) bool { _, t := devices(s); return t == 19 })
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		unhealthy := 0
		for _, d := range r.Devices {
			if d.Health == drahealthv1.HealthStatus_UNHEALTHY {
				unhealthy++
			}
		}
		if unhealthy == 19 {
			break
		}
	}

	// A fatal error from the kubelet plugin helper stops the agent and
	// says so: the process waits on Done and exits with Err.
	select {
	case <-a.Done():
		t.Fatal("agent done before any fatal error")
	default:
	}
	a.HandleError(ctx, errors.New("slice controller gone"), "publishing")
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("agent not done after a fatal error")
	}
	if err := a.Err(); err == nil || !strings.Contains(err.Error(), "publishing: slice controller gone") {
		t.Errorf("Err after a fatal error: %v", err)
	}
}

// An agent with GPUs in MIG mode stops at start, naming the GPU, when it
// may not create MIG instances; without MIG the capability is not needed.
// A GPU in MIG mode configured whole stops it too. NVML refuses the
// memory of a MIG-enabled GPU to an unprivileged agent: the GPU is still
// described, so that the error says what is wrong.
func TestStartChecksMIGPrivilegeOnlyForMIG(t *testing.T) {
	denied := errors.New("no SYS_ADMIN")
	for _, tc := range []struct {
		mode    config.Mode
		migOn   bool
		wantErr string
	}{
		{mode: config.MIG, migOn: true, wantErr: `GPU 0 (NVIDIA H100 80GB HBM3) is configured for mode "mig": no SYS_ADMIN`},
		{mode: config.Whole},
		{mode: config.Whole, migOn: true, wantErr: `GPU 0 (GPU-`},
	} {
		name := string(tc.mode) // short: the socket's path must fit 108 bytes
		if tc.migOn && tc.mode != config.MIG {
			name += "-on"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1", MIG: tc.migOn, Unprivileged: true})
			if err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.DefaultMode = tc.mode
			o := testOptions("node-1", cfg, lib, fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}), t.TempDir())
			o.CanManageMIG = func() error { return denied }
			a, err := agent.Start(ctx, o)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				a.Stop()
				return
			}
			if err == nil {
				a.Stop()
				t.Fatalf("started, want an error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, denied) != (tc.mode == config.MIG) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
