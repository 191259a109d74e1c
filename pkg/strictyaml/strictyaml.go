// Package strictyaml decodes the YAML or JSON files users write (plugin
// args, the node agent's config, the demo's fleet and workload files)
// strictly, as kube-scheduler decodes its own configuration (keys match
// field names exactly, case included; unknown and duplicate keys are
// errors), and names the field when decoding fails. The decoder alone
// reports an unknown key, or a value that its type's own unmarshaller
// refuses (a quantity, a duration), with no hint of where in the file it
// is.
package strictyaml

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Unmarshal fills v (a pointer) from data; unknown fields are errors.
// A decoding error names every field in error found, as
// "path: Invalid value: ..." or "path: unknown field "key"". Errors it cannot
// place (syntax, duplicate keys) are returned as the decoder gave them.
func Unmarshal(data []byte, v any) error {
	if err := oneDocument(data); err != nil {
		return err
	}
	err := decodeStrict(data, v)
	if err == nil {
		return nil
	}
	if ferr := CheckFinite(data); ferr != nil {
		return ferr
	}
	tree, ok := parseTree(data)
	if !ok {
		return err
	}
	if errs := locate(nil, tree, reflect.TypeOf(v).Elem()); len(errs) > 0 {
		return utilerrors.NewAggregate(errs)
	}
	return err
}

// decodeStrict decodes as kube-scheduler decodes its configuration:
// with sigs.k8s.io/json, whose keys match field names case-sensitively.
// sigs.k8s.io/yaml's UnmarshalStrict matches them as encoding/json does,
// regardless of case, so that a key written twice in two cases
// ("searchBudget", "SearchBudget") kept one value without a word.
func decodeStrict(data []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return utilerrors.NewAggregate(strict)
}

// oneDocument refuses a file of several YAML documents: the decoder
// reads the first and drops the others without a word, so settings
// after a "---" line would be silently ignored (or, after an empty first
// document, all of them). Empty documents after the first (a trailing
// "---", comments only) are harmless.
func oneDocument(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yamlv3.Node
		if err := dec.Decode(&doc); err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		if i > 0 && !isEmptyDocument(&doc) {
			return fmt.Errorf("more than one YAML document (a line of --- starts another): want one")
		}
	}
}

func isEmptyDocument(doc *yamlv3.Node) bool {
	return len(doc.Content) == 0 || doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].Tag == "!!null"
}

// parseTree reads data as untyped JSON values, numbers kept as written
// so that a large integer is judged as the file has it.
func parseTree(data []byte) (any, bool) {
	// Strict, as UnmarshalStrict is: a duplicate key is left to the
	// decoder's own error.
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, false
	}
	return tree, true
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// locate walks node against type t and returns what does not decode.
func locate(p *field.Path, node any, t reflect.Type) []error {
	if node == nil {
		return nil // null decodes into anything
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return decodeLeaf(p, node, t)
	}
	switch t.Kind() {
	case reflect.Struct:
		return locateStruct(p, node, t)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return decodeLeaf(p, node, t) // []byte is a base64 string
		}
		items, ok := node.([]any)
		if !ok {
			return decodeLeaf(p, node, t)
		}
		var errs []error
		for i, item := range items {
			errs = append(errs, locate(index(p, i), item, t.Elem())...)
		}
		return errs
	case reflect.Map:
		entries, ok := node.(map[string]any)
		if !ok {
			return decodeLeaf(p, node, t)
		}
		var errs []error
		for _, k := range sortedKeys(entries) {
			errs = append(errs, locate(key(p, k), entries[k], t.Elem())...)
		}
		return append(errs, decodeKeys(p, entries, t)...)
	case reflect.Interface:
		return nil
	default:
		return decodeLeaf(p, node, t)
	}
}

// locateStruct checks every key of an object against t's JSON fields.
func locateStruct(p *field.Path, node any, t reflect.Type) []error {
	entries, ok := node.(map[string]any)
	if !ok {
		return []error{invalid(p, node, "must be an object")}
	}
	fields := jsonFields(t)
	var errs []error
	for _, k := range sortedKeys(entries) {
		ft, found := fields[k]
		if !found {
			errs = append(errs, unknownField(p, k, sortedKeys(fields)))
			continue
		}
		errs = append(errs, locate(child(p, k), entries[k], ft)...)
	}
	return errs
}

// jsonFields maps the JSON names of t's fields to their types, with the
// fields of embedded structs promoted as encoding/json promotes them
// (anonymous and untagged: metav1.TypeMeta's `json:",inline"` is for
// other encoders; encoding/json sees an empty name).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && ft.Kind() == reflect.Struct && f.Anonymous {
			for n, typ := range jsonFields(ft) {
				if _, shadowed := fields[n]; !shadowed {
					fields[n] = typ
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// decodeLeaf decodes node into a new t and reports the error at p. The
// strict decoder is used so that a type's own unmarshaller sees what the
// file's decoder gave it.
func decodeLeaf(p *field.Path, node any, t reflect.Type) []error {
	raw, err := json.Marshal(node)
	if err != nil {
		return nil
	}
	err = yaml.UnmarshalStrict(raw, reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	return []error{invalid(p, node, leafMessage(t, err))}
}

// decodeKeys checks the keys of a map whose key type parses its text.
func decodeKeys(p *field.Path, entries map[string]any, t reflect.Type) []error {
	if t.Key().Kind() == reflect.String && !decodesItself(t.Key()) {
		return nil
	}
	var errs []error
	for _, k := range sortedKeys(entries) {
		m := reflect.New(reflect.MapOf(t.Key(), reflect.TypeFor[json.RawMessage]()))
		raw, _ := json.Marshal(map[string]json.RawMessage{k: json.RawMessage("null")})
		if err := json.Unmarshal(raw, m.Interface()); err != nil {
			errs = append(errs, field.Invalid(key(p, k), k, "key: "+leafMessage(t.Key(), err)))
		}
	}
	return errs
}

// leafMessage says what a value of type t must be; the decoder's own
// message is kept where the type explains itself (quantities, durations).
func leafMessage(t reflect.Type, err error) string {
	if decodesItself(t) {
		return trimDecoderPrefix(err.Error())
	}
	switch t.Kind() {
	case reflect.Bool:
		return "must be true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("must be a whole number that fits in %s", t.Kind())
	case reflect.Float32, reflect.Float64:
		return "must be a number"
	case reflect.String:
		return "must be a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "must be base64: " + trimDecoderPrefix(err.Error())
		}
		return "must be a list"
	case reflect.Array:
		return "must be a list"
	case reflect.Map:
		return "must be an object"
	}
	return trimDecoderPrefix(err.Error())
}

// trimDecoderPrefix drops sigs.k8s.io/yaml's wrapping, which says
// nothing to the person who wrote the file.
func trimDecoderPrefix(msg string) string {
	for _, prefix := range []string{"error unmarshaling JSON: ", "while decoding JSON: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg
}

// invalid reports a value the file's type refuses; a document that is
// not what the file holds has no path.
func invalid(p *field.Path, node any, msg string) error {
	if p == nil {
		return fmt.Errorf("top level: %s", msg)
	}
	return field.Invalid(p, node, msg)
}

// unknownField says which key of the object at p is not a field, in the
// words encoding/json uses, with the fields that are.
func unknownField(p *field.Path, k string, known []string) error {
	where := ""
	if p != nil {
		where = p.String() + ": "
	}
	return fmt.Errorf("%sunknown field %q (known fields: %s)", where, k, strings.Join(known, ", "))
}

// decodesItself says whether encoding/json hands t's values to t's own
// code, whose message then explains what it wants.
func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

func index(p *field.Path, i int) *field.Path {
	if p == nil {
		return field.NewPath("").Index(i)
	}
	return p.Index(i)
}

func key(p *field.Path, k string) *field.Path {
	if p == nil {
		return field.NewPath("").Key(k)
	}
	return p.Key(k)
}
