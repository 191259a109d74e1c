package strictyaml

import (
	"math"
	"strconv"

	yamlv3 "go.yaml.in/yaml/v3"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckFinite names every value of data written as a float that is not
// finite (.inf, -.Inf, .nan). YAML has them, JSON does not: the
// decoders that go through JSON (sigs.k8s.io/yaml, kube-scheduler's
// --config) refuse the whole file with "json: unsupported value: +Inf"
// and no hint of where. Data that is not YAML is left to the decoder.
func CheckFinite(data []byte) error {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil
	}
	var errs []error
	walkFinite(nil, &doc, &errs)
	return utilerrors.NewAggregate(errs)
}

func walkFinite(p *field.Path, n *yamlv3.Node, errs *[]error) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			walkFinite(p, c, errs)
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkFinite(child(p, n.Content[i].Value), n.Content[i+1], errs)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			walkFinite(index(p, i), c, errs)
		}
	case yamlv3.AliasNode:
		// An alias repeats a value already walked where it was defined.
	case yamlv3.ScalarNode:
		if n.ShortTag() != "!!float" {
			return
		}
		var v float64
		if err := n.Decode(&v); err == nil && (math.IsInf(v, 0) || math.IsNaN(v)) {
			*errs = append(*errs, field.Invalid(p, n.Value, "must be a finite number (not "+strconv.FormatFloat(v, 'g', -1, 64)+")"))
		}
	}
}
