package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

// An agent that cannot list its slices says why at the default
// verbosity, each time it tries, and goes on once it can; stopped while
// waiting, it returns the last cause.
func TestAwaitSliceAccess(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	ctx := klog.NewContext(context.Background(), logger)

	client := fake.NewClientset()
	var selectors []string
	failures := 2
	client.PrependReactor("list", "resourceslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		selectors = append(selectors, a.(clienttesting.ListActionImpl).GetListRestrictions().Fields.String())
		if failures > 0 {
			failures--
			return true, nil, errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
		}
		return false, nil, nil
	})
	if err := awaitSliceAccess(ctx, client, "gpu.nvidia.com", "node-1", time.Millisecond, 2*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if len(logged) != 2 || !strings.Contains(logged[0], "connection refused") || !strings.Contains(logged[0], "node-1") {
		t.Errorf("logged %q, want the two failures with their cause and the node", logged)
	}
	if len(selectors) != 3 || selectors[0] != "spec.driver=gpu.nvidia.com,spec.nodeName=node-1" {
		t.Errorf("listed with %q, want the node's own slices three times", selectors)
	}

	failures = 1 << 30
	stopped, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err := awaitSliceAccess(stopped, client, "gpu.nvidia.com", "node-1", time.Millisecond, 2*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("stopped while waiting: %v, want the cause", err)
	}
}
