package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/pkg/nodeagent/agent"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// The agent's Node is deleted and registered again under its name: the
// agent stops with the reason, so that its restart publishes slices owned
// by the new Node (the old owner's would be garbage collected, again and
// again). Its slices name the Node it started on as their owner, and a
// change to that Node alone does not stop it.
func TestAgentStopsWhenItsNodeIsReplaced(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{Name: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	client := fakeAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "first"}})
	a, err := agent.Start(ctx, testOptions("node-1", config.Default(), lib, client, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	waitFor(t, "slices owned by the node", func() bool {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) > 0 && len(list.Items[0].OwnerReferences) == 1 && list.Items[0].OwnerReferences[0].UID == "first"
	})

	nodes := client.CoreV1().Nodes()
	labelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "first", Labels: map[string]string{"team": "a"}}}
	if _, err := nodes.Update(ctx, labelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
		t.Fatalf("agent stopped on a change to its node: %v", a.Err())
	case <-time.After(200 * time.Millisecond):
	}

	if err := nodes.Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "second"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("agent still running on a replaced node")
	}
	if err := a.Err(); err == nil || !strings.Contains(err.Error(), "node node-1 was created again (UID second, was first)") {
		t.Errorf("agent stopped with %v, want the node's new UID named", err)
	}
}
