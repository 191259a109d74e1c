package manifests

import (
	"reflect"
	"testing"
)

// Users apply the scheduler's and the node agent's kustomizations into one
// namespace: each defines it, and both must define it alike, or whichever
// is applied last silently changes its Pod Security level for the other.
func TestNamespaceIsTheSameInEveryKustomization(t *testing.T) {
	dirs := []string{"scheduler", "scheduler/second-scheduler", "pod-groups", "nodeagent", "nodeagent-clique-label", "nodeagent-mig", "kubectl", "grafana"}
	type seen struct {
		dir string
		obj map[string]any
	}
	first := map[string]seen{}
	for _, dir := range dirs {
		for _, r := range build(t, dir).Resources() {
			obj, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetKind() != "Namespace" {
				continue
			}
			key := r.CurId().String()
			prev, ok := first[key]
			if !ok {
				first[key] = seen{dir, obj}
				continue
			}
			if !reflect.DeepEqual(prev.obj, obj) {
				t.Errorf("%s differs between %s and %s:\n%v\n%v", key, prev.dir, dir, prev.obj, obj)
			}
		}
	}
	if _, ok := first[`Namespace.v1.[noGrp]/gputopo-system.[noNs]`]; !ok {
		t.Errorf("no gputopo-system Namespace among %v", dirs)
	}
}
