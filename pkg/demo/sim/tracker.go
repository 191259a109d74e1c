package sim

import (
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
)

// versioned is the fake clientset's object store with what it lacks of
// an API server for the scheduler: every write gets a new
// resourceVersion, from one counter across all types. The scheduler's
// assume cache orders a claim's versions by it and refuses objects
// without one.
type versioned struct {
	clienttesting.ObjectTracker
	last atomic.Int64
}

func (t *versioned) stamp(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetResourceVersion(strconv.FormatInt(t.last.Add(1), 10))
	return nil
}

func (t *versioned) Add(obj runtime.Object) error {
	if err := t.stamp(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Add(obj)
}

func (t *versioned) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if err := t.stamp(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *versioned) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if err := t.stamp(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *versioned) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if err := t.stamp(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

// Apply applies, then writes the result again with a new version.
func (t *versioned) Apply(gvr schema.GroupVersionResource, cfg runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if err := t.ObjectTracker.Apply(gvr, cfg, ns, opts...); err != nil {
		return err
	}
	m, err := meta.Accessor(cfg)
	if err != nil {
		return err
	}
	obj, err := t.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	return t.Update(gvr, obj, ns)
}
