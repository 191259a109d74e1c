package charts

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// The chart renders as a dependency of another chart, where Helm always
// hands it the parent's global values, and with global values of its own
// (--set global.imageRegistry=..., as platform pipelines pass to every
// chart).
func TestRendersAsADependency(t *testing.T) {
	gputopo, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	parent := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "platform", Version: "1.0.0"}}
	parent.SetDependencies(gputopo)
	top, err := util.ToRenderValues(parent, map[string]any{"global": map[string]any{"imageRegistry": "registry.example.com"}},
		common.ReleaseOptions{Name: "platform", Namespace: "gputopo-system", IsInstall: true, Revision: 1}, nil)
	if err != nil {
		t.Fatalf("values of the parent chart: %v", err)
	}
	if _, err := engine.Render(parent, top); err != nil {
		t.Fatalf("render as a dependency: %v", err)
	}
	if _, err := Render("gputopo", "gputopo-system", parseValues(t, "global: {imageRegistry: registry.example.com}")); err != nil {
		t.Errorf("global values: %v", err)
	}
}

// The schema of nodeAgent.config names exactly the fields of the agent's
// configuration, so that the two stay in step: a field the agent reads
// that the schema refuses could not be set, one the agent does not know
// would pass the schema and stop every agent at start.
func TestNodeAgentConfigSchemaFollowsTheAgent(t *testing.T) {
	data, err := chartDir.ReadFile("gputopo/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	cfg := at(t, schema, "properties", "nodeAgent", "properties", "config")
	compareFields(t, "nodeAgent.config", cfg, reflect.TypeFor[config.Config]())
	compareFields(t, "nodeAgent.config.gpus[]", at(t, cfg, "properties", "gpus", "items"), reflect.TypeFor[config.GPURule]())
	compareFields(t, "nodeAgent.config.shared", at(t, cfg, "properties", "shared"), reflect.TypeFor[config.SharedPolicy]())
	compareFields(t, "nodeAgent.config.health", at(t, cfg, "properties", "health"), reflect.TypeFor[config.HealthPolicy]())
}

// compareFields compares an object schema's properties with the JSON
// names of typ's fields, and checks that it refuses any other.
func compareFields(t *testing.T, where string, object map[string]any, typ reflect.Type) {
	t.Helper()
	if object["additionalProperties"] != false {
		t.Errorf("%s: the schema takes fields it does not name", where)
	}
	var inSchema, inType []string
	for name := range at(t, object, "properties") {
		inSchema = append(inSchema, name)
	}
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		inType = append(inType, name)
	}
	slices.Sort(inSchema)
	slices.Sort(inType)
	if !slices.Equal(inSchema, inType) {
		t.Errorf("%s: the schema names %v, the agent's configuration %v", where, inSchema, inType)
	}
}

// at walks a decoded JSON document by keys.
func at(t *testing.T, doc map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		next, ok := doc[k].(map[string]any)
		if !ok {
			t.Fatalf("schema: no object at %s", strings.Join(keys, "."))
		}
		doc = next
	}
	return doc
}
