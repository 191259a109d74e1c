// Package manifests holds gputopo's install manifests. The scheduler
// configuration and DeviceClasses are embedded for the demo
// (cmd/demo), which runs the same configuration in-process; the test
// builds every kustomization the way `kubectl apply -k` does.
package manifests

import _ "embed"

// SchedulerConfigMap is manifests/scheduler/configmap.yaml: the
// default-scheduler and gputopo-scheduler profiles.
//
//go:embed scheduler/configmap.yaml
var SchedulerConfigMap []byte

// DeviceClasses is manifests/scheduler/deviceclasses/deviceclasses.yaml.
//
//go:embed scheduler/deviceclasses/deviceclasses.yaml
var DeviceClasses []byte

// ExtendedResourcePatch is the patch of the extended-resource overlay
// (manifests/scheduler/extended-resource): the class that also serves
// resources.limits nvidia.com/gpu.
//
//go:embed scheduler/extended-resource/gpu-extended-resource.yaml
var ExtendedResourcePatch []byte

// PodGroupsFeatureGates is the patch of the pod-groups overlay
// (manifests/pod-groups): the scheduler's --feature-gates argument for
// pod groups.
//
//go:embed pod-groups/feature-gates.yaml
var PodGroupsFeatureGates []byte
