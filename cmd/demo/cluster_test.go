package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gputopo/gputopo/pkg/demo/replay"
)

// A pass on a real cluster that fails (or is interrupted) part way still
// removes its namespace: its pods would hold real GPUs.
func TestClusterPassRemovesItsNamespace(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("injected: admission refused")
	})
	w, err := workload(flags{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = clusterPass(ctx, client, w, targets[0], replay.Options{})
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("pass: %v, want the injected error", err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, targets[0].Namespace(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the failed pass: %v, want it deleted", targets[0].Namespace(), err)
	}
}
