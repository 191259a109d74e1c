package gputopology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gputopo/gputopo/pkg/allocator"
)

// Invalid arguments are refused before the plugin touches the framework,
// with the field's path: the scheduler then fails to start.
func TestNewRejectsBadArgs(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"mig: {weight: -1}", "pluginConfig.GPUTopology.args.mig.weight: Invalid value: -1"},
		{"searchBudgt: 10", `unknown field "searchBudgt"`},
		{"workload: [{gpus: 2, share: 0.5, weight: 1}]", "pluginConfig.GPUTopology.args.workload[0].share"},
		{"bindingTimeout: 0s", "pluginConfig.GPUTopology.args.bindingTimeout"},
	} {
		_, err := New(context.Background(), &runtime.Unknown{Raw: []byte(tc.args)}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestTrimSentinel(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: cannot allocate all claims (x)", allocator.ErrUnsatisfiable), "cannot allocate all claims (x)"},
		{fmt.Errorf("%w: resource pool a/b: duplicate", allocator.ErrInvalidPool), "invalid resource pool: resource pool a/b: duplicate"},
		{errors.New("other"), "other"},
	} {
		if got := trimSentinel(tc.err); got != tc.want {
			t.Errorf("trimSentinel(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestSameSlices(t *testing.T) {
	a, b, c := new(int), new(int), new(int)
	for _, tc := range []struct {
		x, y []*int
		want bool
	}{
		{[]*int{a, b}, []*int{b, a}, true},
		{[]*int{a, b}, []*int{a, c}, false},
		{[]*int{a}, []*int{a, b}, false},
		{nil, nil, true},
	} {
		if got := sameSlices(tc.x, tc.y); got != tc.want {
			t.Errorf("sameSlices(%v, %v) = %v", tc.x, tc.y, got)
		}
	}
}
