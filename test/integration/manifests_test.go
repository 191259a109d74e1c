package integration

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// apply creates every object of every YAML file in dir (kustomization
// files excluded), or of the one file dir names, through the API server, in namespace ns when the object
// is namespaced and names none.
func (c *cluster) apply(dir, ns string) []string {
	c.t.Helper()
	cfg, err := clientConfigFromKubeconfig(c.kubeconfig)
	if err != nil {
		c.t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.client.Discovery()))
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		c.t.Fatal(err)
	}
	if strings.HasSuffix(dir, ".yaml") {
		files = []string{dir}
	}
	type doc struct {
		file string
		obj  unstructured.Unstructured
	}
	var docs []doc
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				c.t.Fatalf("%s: %v", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			docs = append(docs, doc{f, obj})
		}
	}
	// Namespaces first, as kubectl does.
	slices.SortStableFunc(docs, func(a, b doc) int {
		return cmp.Compare(kindOrder(a.obj.GetKind()), kindOrder(b.obj.GetKind()))
	})
	var applied []string
	for _, d := range docs {
		f, obj := d.file, d.obj
		{
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				c.t.Fatalf("%s: %s: %v", f, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == "namespace" {
				if obj.GetNamespace() == "" {
					obj.SetNamespace(ns)
				}
				ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
			}
			_, err = ri.Create(c.ctx, &obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) && gvk.Kind == "Namespace" {
				continue // both the scheduler's and the agent's manifests have it
			}
			if err != nil {
				c.t.Fatalf("%s: create %s %s: %v", f, gvk.Kind, obj.GetName(), err)
			}
			applied = append(applied, strings.ToLower(gvk.Kind)+"/"+obj.GetName())
		}
	}
	return applied
}

func kindOrder(kind string) int {
	switch kind {
	case "Namespace":
		return 0
	case "ServiceAccount", "ClusterRole", "Role":
		return 1
	}
	return 2
}
