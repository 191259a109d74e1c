// Package perf benchmarks gputopo with upstream's scheduler_perf harness
// (k8s.io/kubernetes/test/integration/scheduler_perf): upstream's own DRA
// workloads, taken from the module cache and changed only in their
// scheduler configuration, and gputopo's workloads, each run with the
// in-tree DynamicResources plugin and with gputopo in the same process.
// `make bench` runs them and prints the ratios; see BENCHMARKS.md.
package perf

import (
	"fmt"
	"os"
	"testing"

	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
