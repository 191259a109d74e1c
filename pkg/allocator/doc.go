// Package allocator is gputopo's allocation engine. Given a node, the
// ResourceSlices, the DeviceClasses, what is already allocated or in flight
// (an AllocatedState, from the scheduler's claim tracker) and a pod's
// ResourceClaims, it returns the best allocation
// result for every claim, or a precise reason why there is none.
//
// Feasibility follows k8s.io/dynamic-resource-allocation/structured exactly:
// the engine first runs the same depth-first search in the same device order
// as upstream's allocator (so it succeeds, fails and reports input errors
// exactly when upstream does), then, when that search found a solution,
// explores further solutions within a step budget and keeps the best one
// under the Policy: NVLink locality, MIG placements that keep large profiles
// placeable, and shared-capacity packing against fragmentation.
//
// What the engine avoids re-doing per pod and per node, compared with
// upstream: slices are indexed once per Inventory (not converted per call),
// and CEL selector results are cached per device and expression for as long
// as the Inventory lives, and looked up once per node and expression. The
// further search visits one of each set of twins (devices nothing but their
// identity tells apart, such as the GPUs of an NVSwitch board; twins.go):
// swapping twins gives an allocation exactly as good, so the choice is the
// one a search of every solution would make.
//
// The package imports k8s.io/api, apimachinery and
// k8s.io/dynamic-resource-allocation only, never k8s.io/kubernetes.
package allocator
