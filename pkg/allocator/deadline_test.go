package allocator

import (
	"context"
	"errors"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func TestWithDeadline(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{identicalGPUs("n", 40)}
	// Two requests whose devices must share the uuid: no solution, and
	// 40 x 39 pairs to try without skipping twins.
	never := claimOf("never", exact("a", gpuClass.Name, 1), exact("b", gpuClass.Name, 1))
	never.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(drvNVIDIA + "/uuid"))}}
	pair := claimOf("pair", exact("r", gpuClass.Name, 2))
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name     string
		claim    *resourceapi.ResourceClaim
		deadline time.Time
		wantErr  error // nil: an allocation
	}{
		{"past, before a solution: the deadline's error", never, past, context.DeadlineExceeded},
		{"in the future: searched to the end", never, future, ErrUnsatisfiable},
		{"past, after a solution: the best so far", pair, past, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			e.noTwins = true
			ctx := WithDeadline(context.Background(), tc.deadline)
			res, err := e.NewSession(NewInventory(sl, DefaultFeatures()), testClasses, emptyState(), []*resourceapi.ResourceClaim{tc.claim}).Allocate(ctx, node("n"), nil)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("got %v, %v; want an error wrapping %v", res, err, tc.wantErr)
			case tc.wantErr == nil && err != nil:
				t.Fatalf("got %v, want an allocation", err)
			case tc.wantErr == nil && res.Quality.Explored >= 39*40/2:
				t.Errorf("explored all %d pairs past the deadline", res.Quality.Explored)
			}
		})
	}
}
