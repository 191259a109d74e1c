package replay

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A stream the in-process API server reset under load (seen in CI:
// "stream error: stream ID 1185; PROTOCOL_ERROR; received from peer") is
// read again; a refusal or the run's end is not.
func TestRetryRead(t *testing.T) {
	reset := &url.Error{Op: "Get", URL: "https://127.0.0.1/api/v1/namespaces/demo-intree/pods", Err: http2.StreamError{StreamID: 1185, Code: http2.ErrCodeProtocol}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
	for _, tc := range []struct {
		name      string
		err       error
		wantCalls int
		wantErr   bool
	}{
		{"stream reset once", reset, 2, false},
		{"forbidden", forbidden, 1, true},
		{"run cancelled", context.Canceled, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryRead(func() error {
				calls++
				if calls == 1 {
					return tc.err
				}
				return nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Errorf("%d calls, error %v; want %d calls, error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
