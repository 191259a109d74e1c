package gputopology

import (
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// profileHandle is a framework handle whose profile enables plugins.
type profileHandle struct {
	fwk.Handle
	plugins schedconfig.Plugins
}

func (h profileHandle) ProfileName() string               { return "gputopo-scheduler" }
func (h profileHandle) ListPlugins() *schedconfig.Plugins { return &h.plugins }

func enabled(names ...string) schedconfig.PluginSet {
	var set schedconfig.PluginSet
	for _, n := range names {
		set.Enabled = append(set.Enabled, schedconfig.Plugin{Name: n})
	}
	return set
}

func TestCheckProfile(t *testing.T) {
	all := schedconfig.Plugins{PreFilter: enabled(Name), Filter: enabled(Name), PostFilter: enabled(Name), Reserve: enabled(Name), PreBind: enabled(Name), Score: enabled(Name)}
	withInTree := all
	withInTree.Reserve = enabled(Name, inTreeDRA)
	noReserve := all
	noReserve.Reserve = enabled()
	noPreBind := all
	noPreBind.PreBind = enabled("VolumeBinding")
	noPostFilter := all
	noPostFilter.PostFilter = enabled("DefaultPreemption")
	for _, tc := range []struct {
		name    string
		plugins schedconfig.Plugins
		want    string // "": no error
	}{
		{name: "every extension point that allocates", plugins: all},
		{name: "DynamicResources too", plugins: withInTree, want: `profile "gputopo-scheduler" enables both GPUTopology and DynamicResources`},
		{name: "filter only", plugins: schedconfig.Plugins{Filter: enabled(Name)}, want: "(not at preFilter, postFilter, reserve, preBind)"},
		{name: "score only", plugins: schedconfig.Plugins{Score: enabled(Name)}, want: "(not at preFilter, filter, postFilter, reserve, preBind)"},
		{name: "without reserve", plugins: noReserve, want: "(not at reserve)"},
		{name: "without preBind", plugins: noPreBind, want: "(not at preBind)"},
		{name: "without postFilter: an unusable claim would never be freed", plugins: noPostFilter, want: "(not at postFilter): enable it at preFilter, filter, postFilter, reserve and preBind"},
		{name: "only under podGroupPostFilter", plugins: schedconfig.Plugins{PodGroupPostFilter: enabled(Name)}, want: "(not at preFilter, filter, postFilter, reserve, preBind)"},
		{name: "built outside any profile", plugins: schedconfig.Plugins{Filter: enabled("NodeResourcesFit")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkProfile(profileHandle{plugins: tc.plugins})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
