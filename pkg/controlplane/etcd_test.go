package controlplane

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
)

// lockedBuffer is a bytes.Buffer etcd's goroutines may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestEtcdStopsWithoutErrors(t *testing.T) {
	var out lockedBuffer
	_, stop, err := startEtcdLogging(t.TempDir(), &out)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if s := out.String(); s != "" {
		t.Errorf("etcd logged on a normal stop:\n%s", s)
	}
}

func TestEtcdLoggerKeepsOtherErrors(t *testing.T) {
	var out lockedBuffer
	var closing atomic.Bool
	lg := etcdLogger(&out, &closing)
	lg.Error(servingEnded, zap.String("error", "accept: connection reset"))
	closing.Store(true)
	lg.With(zap.String("member", "default")).Error(servingEnded)
	lg.Error("failed to save snapshot")
	lg.Warn("slow fdatasync")
	got := out.String()
	for _, want := range []string{"accept: connection reset", "failed to save snapshot"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, servingEnded); n != 1 {
		t.Errorf("%d lines of %q, want 1 (the one before closing):\n%s", n, servingEnded, got)
	}
	if strings.Contains(got, "slow fdatasync") {
		t.Errorf("a warning was logged; only errors should be:\n%s", got)
	}
}
