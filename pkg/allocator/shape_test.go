package allocator

import (
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Nodes of one model whose devices carry the same taint share a shape
// whenever each taint was added (the API server stamps the time on every
// new one, and the search does not read it); a different taint is a
// different shape.
func TestShapeIgnoresWhenTaintsWereAdded(t *testing.T) {
	taint := func(s *resourceapi.ResourceSlice, key string, added time.Time) *resourceapi.ResourceSlice {
		s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: key, Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: added}}}
		return s
	}
	now := time.Now()
	inv := NewInventory([]*resourceapi.ResourceSlice{
		taint(nvswitchNode("a"), "xid", now),
		taint(nvswitchNode("b"), "xid", now.Add(time.Hour)),
		taint(nvswitchNode("c"), "ecc", now),
	}, DefaultFeatures())
	ids := map[string]uint64{}
	for _, n := range []string{"a", "b", "c"} {
		v, err := inv.view(node(n))
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = inv.shapeID(v)
	}
	if ids["a"] != ids["b"] {
		t.Errorf("the same taint added at different times: shapes %d and %d, want one", ids["a"], ids["b"])
	}
	if ids["a"] == ids["c"] {
		t.Errorf("different taints: one shape %d", ids["a"])
	}
}

// A full shape table starts again: shapes that come later are still
// shared (a table that only stopped growing would give every later node
// a number of its own, and the memo would stop answering across nodes).
func TestShapeTableStartsAgainWhenFull(t *testing.T) {
	table := newShapeTable()
	for i := range maxShapes + 10 {
		table.intern(fmt.Appendf(nil, "shape %d", i))
	}
	if len(table.ids) > maxShapes {
		t.Errorf("%d shapes held, want at most %d", len(table.ids), maxShapes)
	}
	if a, b := table.intern([]byte("new model")), table.intern([]byte("new model")); a != b {
		t.Errorf("a new shape after the table filled: numbers %d and %d, want one", a, b)
	}
}
