package sim

import (
	"context"
	"sync"
)

// inParallel calls do(i) for i in [0, n), at most workers at once, then
// done(i) (when not nil) after each success, one call at a time, so that
// progress reporting needs no lock of its own. It returns the first error
// by index and stops handing out work once ctx is done or a call failed:
// a long table does not go on for nothing.
func inParallel(ctx context.Context, workers, n int, do func(i int) error, done func(i int)) error {
	errs := make([]error, n)
	next := make(chan int)
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	var reporting sync.Mutex
	// No more workers than jobs: an idle one costs its stack and nothing
	// else, but --parallel may be far above the jobs at hand.
	for range max(1, min(workers, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// A job handed out as another failed is not started.
				if stopped(stop) || ctx.Err() != nil {
					continue
				}
				errs[i] = do(i)
				if errs[i] != nil {
					stopOnce.Do(func() { close(stop) })
				} else if done != nil {
					reporting.Lock()
					done(i)
					reporting.Unlock()
				}
			}
		}()
	}
hand:
	for i := range n {
		// A send that waits for a free worker gives up on a failure or
		// ctx.
		select {
		case next <- i:
		case <-stop:
			break hand
		case <-ctx.Done():
			break hand
		}
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

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// progress adapts a per-run callback to inParallel's done; nil stays nil.
func progress[R any](report func(R), runs []R) func(int) {
	if report == nil {
		return nil
	}
	return func(i int) { report(runs[i]) }
}
