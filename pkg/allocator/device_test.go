package allocator

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2/ktesting"
)

// The inventory keeps device objects across pods, so the per-device CEL
// cache must stay bounded when every pod brings a selector of its own.
func TestMatchCacheBounded(t *testing.T) {
	ctx := context.Background() // quiet: 3,000 allocations
	e, err := New(Options{Features: DefaultFeatures(), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	sl := pairNode("node-a")
	inv := NewInventory([]*resourceapi.ResourceSlice{sl}, DefaultFeatures())
	n := node("node-a")
	for i := range 3000 {
		sel := fmt.Sprintf(`device.attributes["gpu.nvidia.com"].memory > %d`, i)
		claims := []*resourceapi.ResourceClaim{claimOf("c", exact("r", gpuClass.Name, 1, sel))}
		res, err := e.NewSession(inv, testClasses, emptyState(), claims).Allocate(ctx, n, nil)
		if err != nil || res == nil {
			t.Fatalf("pod %d: %v %v", i, res, err)
		}
	}
	for _, d := range inv.devicesOf(sl) {
		if got := len(d.matches); got > maxMatchesPerDevice {
			t.Errorf("device %s caches %d selector results, want at most %d", d.api.Name, got, maxMatchesPerDevice)
		}
	}
}

// Evicting from a full cache keeps every answer right, legacy and stable
// apart: allowMultipleAllocations is hidden from legacy expressions.
func TestMatchCacheEvictionKeepsResults(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
	d := newDevice(sharedNode("node-a", 1), 0)
	const multi = `device.allowMultipleAllocations == true`
	for i := range 4 * maxMatchesPerDevice {
		expr := fmt.Sprintf(`device.driver == "gpu.nvidia.com" && %d >= 0`, i)
		for _, legacy := range []bool{false, true} {
			if m, err := d.match(ctx, celCache, expr, legacy); err != nil || !m {
				t.Fatalf("%s (legacy %v): %v %v, want true", expr, legacy, m, err)
			}
		}
		if m, err := d.match(ctx, celCache, multi, false); err != nil || !m {
			t.Fatalf("%s: %v %v, want true", multi, m, err)
		}
		if m, _ := d.match(ctx, celCache, multi, true); m {
			t.Fatalf("%s (legacy): true, want allowMultipleAllocations hidden", multi)
		}
		if got := len(d.matches); got > maxMatchesPerDevice {
			t.Fatalf("%d cached results, want at most %d", got, maxMatchesPerDevice)
		}
	}
}
