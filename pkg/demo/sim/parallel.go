package sim

import (
	"context"
	"sync"
)

// inParallel calls do(i) for i in [0, n), at most workers at once, and
// returns the first error by index; it stops handing out work once ctx
// is done.
func inParallel(ctx context.Context, workers, n int, do func(i int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = do(i)
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
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
