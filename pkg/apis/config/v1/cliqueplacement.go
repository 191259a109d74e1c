package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/apis/config"
	"github.com/gputopo/gputopo/pkg/contract"
)

// CliquePlacementKind is the kind of GPUCliquePlacementArgs.
const CliquePlacementKind = "GPUCliquePlacementArgs"

// DefaultMaxPlacements is four: best-fit cliques leave room for a clique
// whose CPU, memory or devices the estimate did not see, at four trials
// of the group at most.
const DefaultMaxPlacements = 4

// GPUCliquePlacementArgs is the versioned form of
// config.GPUCliquePlacementArgs.
type GPUCliquePlacementArgs struct {
	metav1.TypeMeta `json:",inline"`

	// MaxPlacements: how many cliques one pod group is tried in at most,
	// best fit first. Default 4. A group that needs no GPU of GPUClasses
	// is tried in every clique.
	MaxPlacements *int32 `json:"maxPlacements,omitempty"`
	// GPUClasses: DeviceClasses whose requests (and extended resources)
	// count as whole GPUs in the estimate of what a group needs. Default
	// [gpu.nvidia.com].
	GPUClasses []string `json:"gpuClasses,omitempty"`
}

// SetCliquePlacementDefaults fills every unset field.
func SetCliquePlacementDefaults(a *GPUCliquePlacementArgs) {
	if a.MaxPlacements == nil {
		a.MaxPlacements = ptr.To[int32](DefaultMaxPlacements)
	}
	if a.GPUClasses == nil {
		a.GPUClasses = []string{contract.ClassGPU}
	}
}

// DecodeCliquePlacement is Decode for GPUCliquePlacementArgs.
func DecodeCliquePlacement(obj runtime.Object) (*config.GPUCliquePlacementArgs, error) {
	v := &GPUCliquePlacementArgs{}
	if o, ok := obj.(*GPUCliquePlacementArgs); ok {
		v = o.DeepCopy()
	} else if err := decodeStrict(obj, v, CliquePlacementKind); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(v.TypeMeta, CliquePlacementKind); err != nil {
		return nil, err
	}
	SetCliquePlacementDefaults(v)
	return &config.GPUCliquePlacementArgs{MaxPlacements: *v.MaxPlacements, GPUClasses: append([]string(nil), v.GPUClasses...)}, nil
}

// DeepCopyObject implements runtime.Object.
func (a *GPUCliquePlacementArgs) DeepCopyObject() runtime.Object { return a.DeepCopy() }

// DeepCopy copies the args.
func (a *GPUCliquePlacementArgs) DeepCopy() *GPUCliquePlacementArgs {
	if a == nil {
		return nil
	}
	out := *a
	out.MaxPlacements = copyPtr(a.MaxPlacements)
	if a.GPUClasses != nil {
		out.GPUClasses = append([]string(nil), a.GPUClasses...)
	}
	return &out
}
