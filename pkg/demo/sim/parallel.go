package sim

import (
	"context"
	"sync"
	"sync/atomic"
)

// inParallel calls do(i) for i in [0, n), at most workers at once, then
// done(i) (when not nil) after each success, one call at a time, so that
// progress reporting needs no lock of its own. It returns the first error
// by index and stops handing out work once ctx is done or a call failed:
// a long table does not go on for nothing.
func inParallel(ctx context.Context, workers, n int, do func(i int) error, done func(i int)) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	var reporting sync.Mutex
	var failed atomic.Bool
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = do(i)
				if errs[i] != nil {
					failed.Store(true)
				} else if done != nil {
					reporting.Lock()
					done(i)
					reporting.Unlock()
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil || failed.Load() {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// progress adapts a per-run callback to inParallel's done; nil stays nil.
func progress[R any](report func(R), runs []R) func(int) {
	if report == nil {
		return nil
	}
	return func(i int) { report(runs[i]) }
}
