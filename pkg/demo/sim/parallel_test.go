package sim

import (
	"context"
	"errors"
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
