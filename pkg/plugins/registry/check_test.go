package registry

import (
	"strings"
	"testing"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
)

// decode reads a KubeSchedulerConfiguration with kube-scheduler's
// defaults, as its --config is read.
func decode(t *testing.T, profile string) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	data := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: gputopo-scheduler\n" + profile
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*schedconfig.KubeSchedulerConfiguration)
}

func TestCheckConfig(t *testing.T) {
	for _, tc := range []struct {
		name, profile string
		want          []string // nil: no error
	}{{
		name:    "gputopo's plugins with args and weights, an in-tree plugin's args",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology, weight: 5}\n      - {name: GPUConsumable}\n  pluginConfig:\n  - name: GPUTopology\n    args: {linkClassCost: 2}\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n",
	}, {
		name:    "a misspelt plugin's args would be ignored",
		profile: "  pluginConfig:\n  - name: GPUTopolgy\n    args: {linkClassCost: 2}\n",
		want:    []string{`profiles[0].pluginConfig[0].name: Invalid value: "GPUTopolgy"`, "GPUTopology"},
	}, {
		name:    "args for a plugin the profile does not enable would configure nothing",
		profile: "  pluginConfig:\n  - name: GPUTopology\n    args: {packing: {enabled: false}}\n",
		want:    []string{`profiles[0].pluginConfig[0].name: Invalid value: "GPUTopology": profile gputopo-scheduler does not enable this plugin`},
	}, {
		name:    "args for a plugin enabled outside multiPoint (that it runs at every point it needs is the plugin's own check)",
		profile: "  plugins:\n    filter:\n      enabled:\n      - {name: GPUTopology}\n  pluginConfig:\n  - name: GPUTopology\n    args: {linkClassCost: 2}\n",
	}, {
		name:    "a scorer without the plugin whose measure it reads",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUConsumable}\n    score:\n      enabled:\n      - {name: GPUPartitionable}\n",
		want: []string{`profiles[0].plugins: Invalid value: "GPUConsumable": GPUConsumable scores nodes by what GPUTopology measures`,
			`profiles[0].plugins: Invalid value: "GPUPartitionable"`},
	}, {
		name:    "args for a plugin that takes none would be ignored",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n      - {name: GPUConsumable}\n  pluginConfig:\n  - name: GPUConsumable\n    args: {weight: 50}\n",
		want:    []string{"profiles[0].pluginConfig[0].args: Forbidden: GPUConsumable takes no args"},
	}, {
		name:    "a negative weight for gputopo's plugin, at either extension point",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUConsumable, weight: -20}\n    score:\n      enabled:\n      - {name: GPUTopology, weight: -1}\n",
		want:    []string{"profiles[0].plugins.multiPoint.enabled[GPUConsumable].weight: Invalid value: -20", "profiles[0].plugins.score.enabled[GPUTopology].weight: Invalid value: -1"},
	}, {
		name:    "a placement scorer's negative weight",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n      - {name: GPUCliquePlacement}\n      disabled:\n      - {name: TopologyPlacementGenerator}\n    placementScore:\n      enabled:\n      - {name: GPUCliquePlacement, weight: -1}\n",
		want:    []string{"profiles[0].plugins.placementScore.enabled[GPUCliquePlacement].weight: Invalid value: -1"},
	}, {
		name:    "pod-group placement without the plugin that allocates the claims",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUCliquePlacement}\n      disabled:\n      - {name: TopologyPlacementGenerator}\n",
		want:    []string{`profiles[0].plugins: Invalid value: "GPUCliquePlacement": GPUCliquePlacement places pod groups where GPUTopology can allocate their claims`},
	}, {
		name:    "two placement generators: refused whatever the pod-group gates",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n      - {name: GPUCliquePlacement}\n",
		want:    []string{`profiles[0].plugins: Invalid value: "GPUCliquePlacement": GPUCliquePlacement replaces the in-tree TopologyPlacementGenerator`, "disable TopologyPlacementGenerator under multiPoint in profile gputopo-scheduler"},
	}, {
		name:    "the in-tree generator disabled under placementGenerate",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n      - {name: GPUCliquePlacement}\n    placementGenerate:\n      disabled:\n      - {name: TopologyPlacementGenerator}\n",
	}, {
		name:    "every generator disabled with * under placementGenerate, GPUCliquePlacement listed there again",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n      - {name: GPUCliquePlacement}\n    placementGenerate:\n      enabled:\n      - {name: GPUCliquePlacement}\n      disabled:\n      - {name: '*'}\n",
	}, {
		name:    "every generator disabled with * under placementGenerate drops GPUCliquePlacement's multiPoint entry there",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUTopology}\n      - {name: GPUCliquePlacement}\n    placementGenerate:\n      disabled:\n      - {name: '*'}\n",
		want:    []string{`profiles[0].plugins.placementGenerate.disabled: Invalid value: "*": disables every placement generator in profile gputopo-scheduler, GPUCliquePlacement's multiPoint entry included`},
	}, {
		name:    "GPUTopology only under podGroupPostFilter allocates nothing",
		profile: "  plugins:\n    multiPoint:\n      enabled:\n      - {name: GPUCliquePlacement}\n      - {name: GPUConsumable}\n      disabled:\n      - {name: TopologyPlacementGenerator}\n    podGroupPostFilter:\n      enabled:\n      - {name: GPUTopology}\n",
		want: []string{`profiles[0].plugins: Invalid value: "GPUCliquePlacement": GPUCliquePlacement places pod groups where GPUTopology can allocate their claims`,
			`profiles[0].plugins: Invalid value: "GPUConsumable"`},
	}, {
		name:    "an in-tree plugin's negative weight is kube-scheduler's business",
		profile: "  plugins:\n    score:\n      enabled:\n      - {name: NodeResourcesBalancedAllocation, weight: -1}\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckConfig(decode(t, tc.profile))
			if tc.want == nil {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
		})
	}
}
