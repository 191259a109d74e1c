package strictyaml

import (
	"testing"
)

// Whatever the file holds, Unmarshal returns an error or a value, never
// panics, and agrees with the strict decoder on whether the file is good.
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
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var a, b file
		err := Unmarshal([]byte(in), &a)
		strictErr := strictUnmarshal([]byte(in), &b)
		if (err == nil) != (strictErr == nil) {
			t.Fatalf("%q: Unmarshal %v, strict decoder %v", in, err, strictErr)
		}
	})
}
