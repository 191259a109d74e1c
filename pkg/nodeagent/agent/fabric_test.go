package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// A GB200 tray whose NVLink fabric is still being set up when the agent
// starts publishes its GPUs without a clique, then, once the fabric
// manager is done, with it, and labels the node, without a restart.
func TestCliqueKnownOnceTheFabricIsSetUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.GB200Tray, mocknvml.Options{Name: "tray-1", Rack: "rack-a", FabricPending: true})
	if err != nil {
		t.Fatal(err)
	}
	// The label an earlier run of the agent set stays while the fabric is
	// set up again (after a reboot, say).
	client := fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1", Labels: map[string]string{contract.LabelClique: "earlier"}}})
	// The API server refuses the label for a while once the fabric is up:
	// the agent tries again.
	var refuseLabels atomic.Bool
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuseLabels.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	defer startLabellingTray(ctx, t, lib, client).Stop()

	// cliques are the cliqueID attributes of the published GPUs, "" for a
	// GPU without one; nil until the slices are out.
	cliques := func() []string {
		var out []string
		for _, d := range publishedDevices(ctx, t, client) {
			out = append(out, cliqueOf(d))
		}
		return out
	}
	waitFor(t, "the GPUs published without a clique", func() bool {
		got := cliques()
		return len(got) == 4 && got[0] == "" && got[3] == ""
	})
	time.Sleep(50 * time.Millisecond) // several polls while the fabric is pending
	if got := cliques(); got[0] != "" {
		t.Fatalf("clique %q published while the fabric is being set up", got[0])
	}
	if node, err := client.CoreV1().Nodes().Get(ctx, "tray-1", metav1.GetOptions{}); err != nil || node.Labels[contract.LabelClique] != "earlier" {
		t.Fatalf("node labels %v (%v) while the fabric is being set up, want the earlier clique label left alone", node.Labels, err)
	}

	refuseLabels.Store(true)
	lib.CompleteFabric()
	waitFor(t, "every GPU published in the rack's clique", func() bool {
		got := cliques()
		for _, c := range got {
			if c == "" || c != got[0] {
				return false
			}
		}
		return len(got) == 4
	})
	time.Sleep(50 * time.Millisecond) // several refused label patches
	refuseLabels.Store(false)
	waitFor(t, "the node labelled with the clique", func() bool {
		node, err := client.CoreV1().Nodes().Get(ctx, "tray-1", metav1.GetOptions{})
		return err == nil && node.Labels[contract.LabelClique] == cliques()[0]
	})
}

// An agent stopped while the fabric is still being set up stops.
func TestStopWhileTheFabricIsPending(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.GB200Tray, mocknvml.Options{Name: "tray-1", FabricPending: true})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions("tray-1", config.Default(), lib, fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1"}}), t.TempDir())
	o.FabricPollInterval = time.Millisecond
	a, err := agent.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	stopped := make(chan struct{})
	go func() {
		a.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return while the fabric was pending")
	}
}

// startLabellingTray starts the agent of node tray-1 with cliqueLabel,
// reading the fabric every 10ms.
func startLabellingTray(ctx context.Context, t *testing.T, lib *mocknvml.Server, client kubernetes.Interface) *agent.Agent {
	t.Helper()
	cfg := config.Default()
	cfg.CliqueLabel = true
	o := testOptions("tray-1", cfg, lib, client, t.TempDir())
	o.FabricPollInterval = 10 * time.Millisecond
	a, err := agent.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func cliqueOf(d resourceapi.Device) string {
	if v, ok := d.Attributes[contract.AttrCliqueID]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A clique that changes after it is known is followed: a tray moved to
// another rack's fabric is published, and labelled, in the new rack's
// clique; a fabric that then fails takes the tray out of every clique.
// Reads of the fabric that fail for a while change nothing.
func TestCliqueFollowedAfterItIsKnown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.GB200Tray, mocknvml.Options{Name: "tray-1", Rack: "rack-a"})
	if err != nil {
		t.Fatal(err)
	}
	client := fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1"}})
	defer startLabellingTray(ctx, t, lib, client).Stop()

	// published is the one clique every published GPU is in, "" for
	// none, and whether all four are out and agree.
	published := func() (string, bool) {
		devices := publishedDevices(ctx, t, client)
		if len(devices) != 4 {
			return "", false
		}
		for _, d := range devices {
			if cliqueOf(d) != cliqueOf(devices[0]) {
				return "", false
			}
		}
		return cliqueOf(devices[0]), true
	}
	label := func() (string, bool) {
		node, err := client.CoreV1().Nodes().Get(ctx, "tray-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := node.Labels[contract.LabelClique]
		return v, ok
	}
	var first string
	waitFor(t, "the GPUs published and labelled in rack-a's clique", func() bool {
		c, ok := published()
		l, labelled := label()
		first = c
		return ok && c != "" && labelled && l == c
	})

	// Another tool removes the label, then sets another value: the
	// agent writes its own again.
	for _, value := range []any{nil, "other.0"} {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{contract.LabelClique: value}}})
		if _, err := client.CoreV1().Nodes().Patch(ctx, "tray-1", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("the label set again after another tool set %v", value), func() bool {
			l, labelled := label()
			return labelled && l == first
		})
	}

	// Reads that fail for a while (a GPU resetting) change nothing.
	lib.FailFabricReads(true)
	time.Sleep(50 * time.Millisecond) // several polls
	if c, ok := published(); !ok || c != first {
		t.Errorf("while the fabric reads fail: published clique %q (all four agree: %v), want %q", c, ok, first)
	}
	if l, labelled := label(); !labelled || l != first {
		t.Errorf("while the fabric reads fail: label %q (set: %v), want %q", l, labelled, first)
	}
	lib.FailFabricReads(false)

	lib.MoveToRack("rack-b")
	waitFor(t, "the GPUs published and labelled in rack-b's clique", func() bool {
		c, ok := published()
		l, labelled := label()
		return ok && c != "" && c != first && labelled && l == c
	})

	lib.FailFabric()
	waitFor(t, "the GPUs published in no clique, and the label removed", func() bool {
		c, ok := published()
		_, labelled := label()
		return ok && c == "" && !labelled
	})
}
