package controlplane

import (
	"fmt"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// tb lets kube-apiserver's in-process test server (built for tests, the
// only supported way to run kube-apiserver inside another process with
// generated certificates and keys) run in a command: logs go to klog,
// failures stop the start with an error, cleanups run at Stop.
type tb struct {
	name     string
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	dirs     []string
}

// fatal is the panic value of FailNow, recovered by Start.
type fatal struct{ msg string }

func (t *tb) Attr(key, value string) {}
func (t *tb) Chdir(dir string)       { panic(fatal{"Chdir is not supported"}) }
func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *tb) Error(args ...any) { klog.ErrorS(nil, fmt.Sprint(args...)); t.Fail() }
func (t *tb) Errorf(format string, args ...any) {
	klog.ErrorS(nil, fmt.Sprintf(format, args...))
	t.Fail()
}
func (t *tb) Fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}
func (t *tb) FailNow() { t.Fail(); panic(fatal{"control plane failed"}) }
func (t *tb) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
func (t *tb) Fatal(args ...any) { t.Fail(); panic(fatal{fmt.Sprint(args...)}) }
func (t *tb) Fatalf(format string, args ...any) {
	t.Fail()
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (t *tb) Helper()                          {}
func (t *tb) Log(args ...any)                  { klog.V(4).Info(fmt.Sprint(args...)) }
func (t *tb) Logf(format string, args ...any)  { klog.V(4).Info(fmt.Sprintf(format, args...)) }
func (t *tb) Name() string                     { return t.name }
func (t *tb) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (t *tb) Skip(args ...any)                 { t.Fatal(args...) }
func (t *tb) Skipf(format string, args ...any) { t.Fatalf(format, args...) }
func (t *tb) SkipNow()                         { t.FailNow() }
func (t *tb) Skipped() bool                    { return false }
func (t *tb) TempDir() string {
	dir, err := os.MkdirTemp("", "gputopo-demo-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.mu.Lock()
	t.dirs = append(t.dirs, dir)
	t.mu.Unlock()
	return dir
}

// cleanup runs the cleanups last-in first-out and removes temp dirs.
func (t *tb) cleanup() {
	t.mu.Lock()
	cleanups, dirs := t.cleanups, t.dirs
	t.cleanups, t.dirs = nil, nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}
