package cliqueplacement

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// classFor maps one extended resource to the whole-GPU class.
type classFor v1.ResourceName

func (r classFor) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	if name != v1.ResourceName(r) {
		return nil
	}
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: contract.ClassGPU}}
}

// listedClaims is a claim tracker that lists its claims.
type listedClaims struct {
	fwk.ResourceClaimTracker
	claims []*resourceapi.ResourceClaim
}

func (l listedClaims) List() ([]*resourceapi.ResourceClaim, error) { return l.claims, nil }

type draWithExtended struct {
	fwk.SharedDRAManager
	claims listedClaims
}

func (d draWithExtended) ResourceClaims() fwk.ResourceClaimTracker { return d.claims }
func (d draWithExtended) DeviceClassResolver() fwk.DeviceClassResolver {
	return classFor("nvidia.com/gpu")
}

// A pod's extended GPUs count toward its group's need, unless its claim
// for them is allocated already (an attempt that did not bind left it):
// those devices are not free either, and counting both hid the clique
// the claim is in from the group that holds it.
func TestExtendedGPUsOfALeftoverClaim(t *testing.T) {
	p := pod("x", nil)
	p.UID = "uid-x"
	p.Spec.Containers = []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}, Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}
	leftover := func(allocated bool) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x-extended-resources-abcde",
			Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "uid-x", Controller: ptr.To(true)}}}}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		want   int
	}{
		{"no claim yet", nil, 4},
		{"its claim allocated", []*resourceapi.ResourceClaim{leftover(true)}, 0},
		{"its claim not allocated", []*resourceapi.ResourceClaim{leftover(false)}, 4},
	} {
		pl := &CliquePlacement{
			draManager: draWithExtended{claims: listedClaims{claims: tc.claims}},
			fts:        plfeature.Features{EnableDRAExtendedResource: true},
			gpuClasses: map[string]bool{contract.ClassGPU: true},
		}
		if got := pl.podGPUs(p, nil, pl.extendedClaimsOf([]*v1.Pod{p})); got != tc.want {
			t.Errorf("%s: %d GPUs, want %d", tc.name, got, tc.want)
		}
	}
}
