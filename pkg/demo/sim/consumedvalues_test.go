package sim

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
)

func consumed(kv ...string) structured.ConsumedCapacity {
	c := structured.ConsumedCapacity{}
	for i := 0; i < len(kv); i += 2 {
		q := resource.MustParse(kv[i+1])
		c[resourceapi.QualifiedName(kv[i])] = &q
	}
	return c
}

func sameMap(a, b structured.ConsumedCapacity) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestConsumedValuesOneMapPerValue(t *testing.T) {
	v := consumedValues{}
	first := v.one(consumed("memory", "8Gi", "cores", "500m"))
	tests := []struct {
		name string
		c    structured.ConsumedCapacity
		same bool
	}{
		{"equal", consumed("memory", "8Gi", "cores", "500m"), true},
		{"written differently", consumed("cores", "0.5", "memory", "8192Mi"), true},
		{"another value", consumed("memory", "8Gi", "cores", "600m"), false},
		{"fewer names", consumed("memory", "8Gi"), false},
		{"another name", consumed("memory", "8Gi", "compute", "500m"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := v.one(tc.c); sameMap(got, first) != tc.same {
				t.Errorf("one(%v) is the map of %v: %v, want %v", tc.c, first, !tc.same, tc.same)
			}
		})
	}
}

func TestConsumedValuesStartAgainWhenFull(t *testing.T) {
	v := consumedValues{}
	for i := range maxConsumedValues + 1 {
		v.one(consumed("memory", resource.NewQuantity(int64(i), resource.BinarySI).String()))
	}
	if len(v) != 1 {
		t.Errorf("table holds %d values after one past its bound, want 1", len(v))
	}
}
