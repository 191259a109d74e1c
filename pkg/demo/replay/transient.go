package replay

import (
	"context"
	"errors"
	"strings"
	"time"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// transient says whether a read failed for the moment only: the
// connection or an HTTP/2 stream reset under load (an in-process API
// server on a busy machine resets streams now and then), or the API
// server asking to be called again. A replay retries such reads rather
// than end a run of minutes.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var stream http2.StreamError
	return errors.As(err, &stream) || strings.Contains(err.Error(), "stream error:") ||
		utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}

// readBackoff retries a transient read five times, over about three
// seconds.
var readBackoff = wait.Backoff{Steps: 6, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1}

// retryRead calls read until it succeeds, fails for good, or transient
// failures outlast readBackoff.
func retryRead(read func() error) error {
	return retry.OnError(readBackoff, transient, read)
}
