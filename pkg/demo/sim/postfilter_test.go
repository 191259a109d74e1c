package sim

import (
	"os"
	"slices"
	"testing"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
)

// When a pod does not fit, an idle claim is freed before anyone is
// evicted: kube-scheduler puts the in-tree DynamicResources plugin before
// DefaultPreemption (its default_plugins.go), as PostFilter and
// PodGroupPostFilter stop at the first plugin that succeeds. The shipped
// profiles put GPUTopology there too.
func TestShippedProfilesFreeClaimsBeforePreempting(t *testing.T) {
	for _, file := range []string{"../../../manifests/scheduler/configmap.yaml", "../../../manifests/scheduler/second-scheduler/configmap.yaml"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := DecodeConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			ctx, _ := shippedConfig(t)
			s, err := New(ctx, cfg, NewClient())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			for name, fw := range s.sched.Profiles {
				plugins := fw.ListPlugins()
				dra := names.DynamicResources
				if name == "gputopo-scheduler" {
					dra = gputopology.Name
				}
				for point, set := range map[string]schedconfig.PluginSet{"PostFilter": plugins.PostFilter, "PodGroupPostFilter": plugins.PodGroupPostFilter} {
					order := pluginNames(set)
					claims, preemption := slices.Index(order, dra), slices.Index(order, names.DefaultPreemption)
					if preemption >= 0 && (claims < 0 || claims > preemption) {
						t.Errorf("profile %s, %s: %v, want %s before %s", name, point, order, dra, names.DefaultPreemption)
					}
				}
			}
		})
	}
}

func pluginNames(set schedconfig.PluginSet) []string {
	var out []string
	for _, p := range set.Enabled {
		out = append(out, p.Name)
	}
	return out
}
