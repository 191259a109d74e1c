// Package integration runs gputopo's scheduler against a real
// kube-apiserver and etcd started in-process, with the real resourceclaim
// controller, and asserts on what the API server holds. The API server
// authorizes with Node and RBAC; the scheduler runs as its own process
// (cmd/scheduler) and the node agents as their service account, with the
// manifests' roles; only the test driver is admin.
package integration

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/kubernetes/test/integration/framework"
)

func TestMain(m *testing.M) {
	// `make test` builds etcd from the module's tool dependency into bin/.
	if bin, err := filepath.Abs("../../bin"); err == nil {
		if _, err := os.Stat(filepath.Join(bin, "etcd")); err == nil {
			os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		}
	}
	framework.EtcdMain(func() int {
		dir, err := os.MkdirTemp("", "gputopo-integration")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := buildBinaries(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		code := m.Run()
		if code == 0 && wholeSuite() {
			code = reportRBACCoverage()
		}
		return code
	})
}

// wholeSuite: the coverage check means something only when every test ran.
func wholeSuite() bool {
	run := flag.Lookup("test.run")
	short := flag.Lookup("test.short")
	return (run == nil || run.Value.String() == "") && (short == nil || short.Value.String() != "true")
}

// reportRBACCoverage fails the suite when a shipped role grants what no
// test used and no reason explains, or when a reason is given for a
// grant a test used.
func reportRBACCoverage() int {
	unused, stale, err := checkRBACCoverage()
	if err != nil {
		fmt.Fprintln(os.Stderr, "RBAC coverage:", err)
		return 1
	}
	if len(unused) > 0 {
		fmt.Fprintln(os.Stderr, "RBAC coverage: the manifests grant what no request of the suite used (remove it, or say why in unusedAllowed):")
		for _, u := range unused {
			fmt.Fprintln(os.Stderr, "  "+u)
		}
	}
	if len(stale) > 0 {
		fmt.Fprintln(os.Stderr, "RBAC coverage: unusedAllowed explains grants the suite used (remove them from it, so that it lists only grants no test exercises):")
		for _, u := range stale {
			fmt.Fprintln(os.Stderr, "  "+u)
		}
	}
	if len(unused)+len(stale) > 0 {
		return 1
	}
	fmt.Println("RBAC coverage: every grant of the scheduler's and node agent's roles was used or is explained")
	return 0
}
