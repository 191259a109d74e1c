package strictyaml

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type limits struct {
	Memory  resource.Quantity `json:"memory"`
	Timeout *metav1.Duration  `json:"timeout,omitempty"`
}

type item struct {
	limits `json:",inline"`
	Count  int64           `json:"count"`
	On     bool            `json:"enabled"`
	Tags   []string        `json:"tags,omitempty"`
	ByGPU  map[int]float64 `json:"byGPU,omitempty"`
}

type file struct {
	metav1.TypeMeta `json:",inline"`
	Items           []item          `json:"items"`
	Named           map[string]item `json:"named,omitempty"`
	Extra           any             `json:"extra,omitempty"`
	// Not promoted: encoding/json ignores "inline" on a named field.
	Nested limits  `json:",inline"`
	Skip   string  `json:"-"`
	Blob   []byte  `json:"blob,omitempty"`
	Fixed  [2]byte `json:"fixed,omitempty"`
}

func TestUnmarshal(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []string // substrings of the error; none: no error
	}{
		"valid": {
			in: "kind: K\nitems: [{memory: 1Gi, timeout: 5s, count: 9223372036854775807, enabled: true, tags: [a], byGPU: {0: 0.5}}]\nextra: {anything: [1]}",
		},
		"bad quantity in a list": {
			in:   "items: [{memory: 1Gi}, {memory: 5x}]",
			want: []string{`items[1].memory: Invalid value: "5x": quantities must match`},
		},
		"bad duration under a map key": {
			in:   "named: {a: {timeout: 5 minutes}}",
			want: []string{`named[a].timeout: Invalid value: "5 minutes": time: unknown unit`},
		},
		"unknown field names the known ones": {
			in:   "items: [{memroy: 1Gi}]",
			want: []string{`items[0]: unknown field "memroy" (known fields: byGPU, count, enabled, memory, tags, timeout)`},
		},
		"a second document is refused, not dropped": {
			in:   "kind: K\n---\nitems: [{memory: 5x}]\n",
			want: []string{"more than one YAML document"},
		},
		"a leading separator and an empty document are one": {
			in: "---\nkind: K\n---\n# nothing here\n",
		},
		"a document after an empty first one is refused, not dropped": {
			in:   "---\n# empty\n---\nkind: K\nitems: [{memory: 5x}]\n",
			want: []string{"more than one YAML document"},
		},
		"a second document on the separator's line": {
			in:   "kind: K\n--- {items: []}\n",
			want: []string{"more than one YAML document"},
		},
		"Windows line endings": {
			in:   "kind: K\r\n---\r\nitems: []\r\n",
			want: []string{"more than one YAML document"},
		},
		"a separator inside a block scalar is text": {
			in: "extra: |\n  a\n  ---\n  b\n",
		},
		"unknown top-level field": {
			in:   "itmes: []",
			want: []string{`unknown field "itmes" (known fields: Nested, apiVersion, blob, extra, fixed, items, kind, named)`},
		},
		"every error at once": {
			in:   "items: [{count: 1.5, enabled: maybe, tags: a}]",
			want: []string{`items[0].count: Invalid value: 1.5: must be a whole number that fits in int64`, `items[0].enabled: Invalid value: "maybe": must be true or false`, `items[0].tags: Invalid value: "a": must be a list`},
		},
		"integer too large": {
			in:   "items: [{count: 9223372036854775808}]",
			want: []string{`items[0].count: Invalid value: 9223372036854775808: must be a whole number`},
		},
		"object expected": {
			in:   "items: [3]",
			want: []string{`items[0]: Invalid value: 3: must be an object`},
		},
		"a list where the file holds an object": {
			in:   "- items: []",
			want: []string{"top level: must be an object"},
		},
		"bad map key": {
			in:   "items: [{byGPU: {x: 1}}]",
			want: []string{`items[0].byGPU[x]: Invalid value: "x": key:`},
		},
		"a key in another case is unknown, as kube-scheduler has it": {
			in:   "items: [{Memory: 5Gi}]",
			want: []string{`items[0]: unknown field "Memory" (known fields:`},
		},
		"a key repeated in another case is refused, not dropped": {
			in:   "kind: a\nKind: b",
			want: []string{`unknown field "Kind"`},
		},
		"a named inline field is not promoted": {
			in:   "memory: 1Gi",
			want: []string{`unknown field "memory" (known fields: Nested, apiVersion, blob,`},
		},
		"a named inline field and a byte array": {
			in: "Nested: {memory: 1Gi}\nfixed: [1, 2]",
		},
		"a field tagged - is unknown": {
			in:   "Skip: x",
			want: []string{`unknown field "Skip"`},
		},
		"bad base64": {
			in:   "blob: \"!!\"",
			want: []string{`blob: Invalid value: "!!": must be base64`},
		},
		"duplicate key kept as the decoder reports it": {
			in:   "kind: a\nkind: b\nitmes: []",
			want: []string{`"kind" already set in map`},
		},
		"syntax error kept as the decoder reports it": {
			in:   "items: [",
			want: []string{"line 1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var f file
			err := Unmarshal([]byte(tc.in), &f)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error with %q, got none", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestUnmarshalFillsTheValue(t *testing.T) {
	var f file
	if err := Unmarshal([]byte("items: [{memory: 2Gi, timeout: 1m, count: 3}]"), &f); err != nil {
		t.Fatal(err)
	}
	got := f.Items[0]
	if got.Memory.Value() != 2<<30 || got.Timeout.Minutes() != 1 || got.Count != 3 {
		t.Errorf("decoded %+v", got)
	}
}
