// Package integration runs gputopo's scheduler against a real
// kube-apiserver and etcd started in-process, with the real resourceclaim
// controller, and asserts on what the API server holds.
package integration

import (
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
	framework.EtcdMain(m.Run)
}
