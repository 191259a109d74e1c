package sim

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// After a call fails no more work is handed out, and the first error by
// index is returned; the successes before it were reported.
func TestInParallelStopsAfterAFailure(t *testing.T) {
	var calls atomic.Int32
	var reported []int
	boom := errors.New("boom")
	err := inParallel(context.Background(), 1, 100, func(i int) error {
		calls.Add(1)
		if i == 1 {
			return boom
		}
		return nil
	}, func(i int) { reported = append(reported, i) })
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d of 100 calls with one worker after the second failed, want 2", n)
	}
	if len(reported) == 0 || reported[0] != 0 {
		t.Errorf("reported %v, want the first success", reported)
	}
}

// Workers beyond the jobs at hand are not started: --parallel may be far
// above the replays of a small table.
func TestInParallelStartsNoMoreWorkersThanJobs(t *testing.T) {
	before := runtime.NumGoroutine()
	var during atomic.Int64
	err := inParallel(context.Background(), 1<<20, 2, func(int) error {
		during.Store(max(during.Load(), int64(runtime.NumGoroutine())))
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if extra := during.Load() - int64(before); extra > 10 {
		t.Errorf("%d goroutines more while 2 jobs ran with 1<<20 workers allowed, want at most 2 workers", extra)
	}
}
