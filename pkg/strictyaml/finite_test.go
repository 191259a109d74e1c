package strictyaml

import (
	"strings"
	"testing"
)

// Non-finite floats are named by field, wherever they are; quoted
// strings, finite numbers and files that are not YAML pass.
func TestCheckFinite(t *testing.T) {
	for _, tc := range []struct {
		data string
		want []string // "" : no error
	}{
		{"a: 1.5\nb: [1, 2e3, -0.5]\nc: '.inf'\nd: .infinity\n", nil},
		{"a: .inf\n", []string{`a: Invalid value: ".inf": must be a finite number (not +Inf)`}},
		{"profiles:\n- pluginConfig:\n  - args: {weight: -.Inf, cost: .NaN}\n", []string{
			`profiles[0].pluginConfig[0].args.weight: Invalid value: "-.Inf"`, `profiles[0].pluginConfig[0].args.cost: Invalid value: ".NaN": must be a finite number (not NaN)`}},
		{"list: [1, .nan]\n", []string{"list[1]"}},
		{"{not yaml", nil},
	} {
		err := CheckFinite([]byte(tc.data))
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%q: %v", tc.data, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %v, want it to contain %q", tc.data, err, w)
			}
		}
	}
}

// Unmarshal names the field of a non-finite number, where the JSON
// decoder says only "unsupported value".
func TestUnmarshalNamesNonFinite(t *testing.T) {
	var v struct {
		Weight float64 `json:"weight"`
	}
	err := Unmarshal([]byte("weight: .inf\n"), &v)
	if err == nil || !strings.Contains(err.Error(), "weight: Invalid value") {
		t.Errorf("error %v, want the field named", err)
	}
}
