package gputopology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

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
		_, err := New(context.Background(), &runtime.Unknown{Raw: []byte(tc.args)}, nil, defaultGates())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func defaultGates() plfeature.Features {
	return plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

// The engine's features follow the scheduler's gates: each gate that can
// be switched off in 1.37 switches its feature off, the others stay, and
// the default gates ask for nothing the engine lacks.
func TestAllocatorFeaturesFollowGates(t *testing.T) {
	if err := unsupportedGates(defaultGates()); err != nil {
		t.Errorf("default gates: %v", err)
	}
	for _, tc := range []struct {
		gate featuregate.Feature
		off  func(allocator.Features) bool
	}{
		{features.DRADeviceTaints, func(f allocator.Features) bool { return !f.DeviceTaints }},
		{features.DRADeviceBindingConditions, func(f allocator.Features) bool { return !f.DeviceBindingAndStatus }},
		{features.DRAPartitionableDevices, func(f allocator.Features) bool { return !f.PartitionableDevices }},
		{features.DRAConsumableCapacity, func(f allocator.Features) bool { return !f.ConsumableCapacity }},
	} {
		t.Run(string(tc.gate), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, tc.gate, false)
			got := allocatorFeatures(defaultGates())
			if !tc.off(got) {
				t.Errorf("gate %s off: features %+v still have it", tc.gate, got)
			}
			if !got.PrioritizedList || !got.AdminAccess {
				t.Errorf("gates left on were switched off: %+v", got)
			}
		})
	}
}

// A gate whose feature the engine lacks stops the plugin at start with
// the gate's name, instead of allocating as if it were off.
func TestNewRefusesUnimplementedGates(t *testing.T) {
	fts := defaultGates()
	fts.EnableDRAListTypeAttributes = true
	fts.EnableDRADeviceCompatibilityGroups = true
	fts.EnableDRANodeAllocatableResources = true
	_, err := New(context.Background(), nil, nil, fts)
	for _, want := range []string{"DRADeviceCompatibilityGroups", "DRAListTypeAttributes", "DRANodeAllocatableResources", "--feature-gates=DRADeviceCompatibilityGroups=false,DRAListTypeAttributes=false,DRANodeAllocatableResources=false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
}

func TestSignPod(t *testing.T) {
	pl := &GPUTopology{fts: defaultGates()}
	pl.fts.EnableDRAExtendedResource = false // no DRA manager here to resolve classes
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want fwk.Code
	}{
		{"no claims: signed", st.MakePod().Name("p").Obj(), fwk.Success},
		{"claims: refused", st.MakePod().Name("p").PodResourceClaims(v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("c")}).Obj(), fwk.Unschedulable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []fwk.SignPlugin{pl, &QualityScorer{name: "q"}} {
				frags, status := p.SignPod(context.Background(), tc.pod)
				if status.Code() != tc.want || len(frags) != 0 {
					t.Errorf("%s: fragments %v, status %v, want no fragments and %v", p.Name(), frags, status, tc.want)
				}
			}
		})
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
