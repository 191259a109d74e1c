package strictyaml

import (
	"reflect"
	"testing"
)

// Whatever the file holds, Unmarshal never panics, and where the strict
// decoder takes the file the walk that names fields finds nothing wrong
// in it (no false alarm waiting for a file with another mistake).
func FuzzUnmarshal(f *testing.F) {
	for _, seed := range []string{
		"items: [{memory: 1Gi, timeout: 5s, count: 3}]",
		"items: [{memory: 5x}]",
		"named: {a: {byGPU: {0: 1, x: 2}}}",
		"- 1",
		"items: {a: 1}",
		"extra: [[[]]]",
		"kind: [1]",
		"items: [{tags: [1, {a: b}]}]",
		"",
		"null",
		"Nested: {memory: 1Gi}",
		"blob: AAEC\nfixed: [1, 2]",
		"kind: a\nkind: b",
		"kind: a\nKind: b",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var a, b file
		_ = Unmarshal([]byte(in), &a)
		if decodeStrict([]byte(in), &b) != nil {
			return
		}
		tree, ok := parseTree([]byte(in))
		if !ok {
			t.Fatalf("%q: the strict decoder takes it, parseTree does not", in)
		}
		if errs := locate(nil, tree, reflect.TypeFor[file]()); len(errs) > 0 {
			t.Fatalf("%q: the strict decoder takes it, the walk reports %v", in, errs)
		}
	})
}
