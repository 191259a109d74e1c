package main

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

func typedSlice(node string, types ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To(node)}}
	for _, t := range types {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: t, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			contract.AttrType: {StringValue: ptr.To(t)}}})
	}
	return s
}

// The arrival curve's capacity: whole GPUs (not MIG partitions) on the
// fleet copy's nodes, or on every node of a real cluster (--kubeconfig),
// where a capacity of 0 left every figure at 100% unallocated.
func TestCountGPUs(t *testing.T) {
	client := fake.NewClientset(
		typedSlice("a", contract.TypeGPU, contract.TypeGPU, contract.TypeMIG),
		typedSlice("b", contract.TypeGPU),
	)
	for _, tc := range []struct {
		nodes map[string]string
		want  float64
	}{
		{nil, 3},
		{map[string]string{"a": "dgx"}, 2},
	} {
		got, err := countGPUs(context.Background(), client, tc.nodes)
		if err != nil || got != tc.want {
			t.Errorf("countGPUs(%v) = %v, %v; want %v", tc.nodes, got, err, tc.want)
		}
	}
}
