package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/gputopo/gputopo/pkg/plugins/cliqueplacement"
	"github.com/gputopo/gputopo/pkg/plugins/consumable"
	"github.com/gputopo/gputopo/pkg/plugins/gputopology"
	"github.com/gputopo/gputopo/pkg/plugins/partitionable"
)

// CheckConfig finds what kube-scheduler's own validation lets through in
// a configuration with gputopo's plugins, and which would leave a user's
// intent silently unapplied:
//   - a pluginConfig entry that names no plugin of this scheduler
//     (kube-scheduler ignores it, so a misspelt GPUTopology would run on
//     its defaults without a word);
//   - args for one of gputopo's plugins in a profile that does not
//     enable it (they configure nothing there: the profile that runs it
//     takes its defaults), or any args for a plugin that takes none;
//   - GPUConsumable, GPUPartitionable or GPUCliquePlacement without
//     GPUTopology, whose measure they read and which allocates the
//     claims of the groups GPUCliquePlacement places;
//   - GPUCliquePlacement next to the in-tree TopologyPlacementGenerator:
//     kube-scheduler allows one generator per profile, but checks it only
//     while the pod-group gates are on, so such a profile starts today
//     and stops the scheduler the day the gates are switched on;
//   - a negative score weight for one of gputopo's plugins, which would
//     turn "the best placement" into "the worst".
func CheckConfig(cfg *schedconfig.KubeSchedulerConfiguration) error {
	ours := Registry()
	known := frameworkplugins.NewInTreeRegistry()
	maps.Copy(known, ours)
	var errs field.ErrorList
	for i, p := range cfg.Profiles {
		path := field.NewPath("profiles").Index(i)
		enabled := enabledPlugins(p.Plugins)
		for j, pc := range p.PluginConfig {
			at := path.Child("pluginConfig").Index(j)
			_, isOurs := ours[pc.Name]
			switch _, ok := known[pc.Name]; {
			case !ok:
				errs = append(errs, field.Invalid(at.Child("name"), pc.Name, noSuchPlugin(ours)))
			case isOurs && !enabled[pc.Name]:
				errs = append(errs, field.Invalid(at.Child("name"), pc.Name, fmt.Sprintf(
					"profile %s does not enable this plugin, so these args configure nothing: move them to the profile that enables it", p.SchedulerName)))
			case takesNoArgs[pc.Name] && pc.Args != nil:
				errs = append(errs, field.Forbidden(at.Child("args"), pc.Name+" takes no args: its weight is the profile's plugin weight, and it reads what GPUTopology chose"))
			}
		}
		errs = append(errs, checkDependencies(path, p, enabled)...)
		for _, set := range []struct {
			point string
			set   schedconfig.PluginSet
		}{{"multiPoint", p.Plugins.MultiPoint}, {"score", p.Plugins.Score}, {"placementScore", p.Plugins.PlacementScore}} {
			for _, pl := range set.set.Enabled {
				if _, ok := ours[pl.Name]; ok && pl.Weight < 0 {
					errs = append(errs, field.Invalid(path.Child("plugins", set.point, "enabled").Key(pl.Name).Child("weight"), pl.Weight,
						"gputopo's plugins take a weight of 0 (their default) or more"))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("scheduler configuration: %w", errs.ToAggregate())
	}
	return nil
}

// needsTopology: gputopo's plugins that read what GPUTopology measures or
// allocates: what each does, and what it does without GPUTopology.
var needsTopology = map[string]struct{ does, without string }{
	consumable.Name:      {"scores nodes by what GPUTopology measures", "every node scores the same"},
	partitionable.Name:   {"scores nodes by what GPUTopology measures", "every node scores the same"},
	cliqueplacement.Name: {"places pod groups where GPUTopology can allocate their claims", "their claims are not allocated, or are allocated blind to links and fragmentation"},
}

// checkDependencies refuses gputopo's plugins without GPUTopology where
// it allocates (needsTopology; enabled only under podGroupPostFilter it
// allocates nothing), and GPUCliquePlacement where it would not be the
// profile's one placement generator (checkGenerator).
func checkDependencies(path *field.Path, p schedconfig.KubeSchedulerProfile, enabled map[string]bool) field.ErrorList {
	var errs field.ErrorList
	allocates := p.Plugins != nil && (slices.Contains(p.Plugins.Names(), gputopology.Name) || has(p.Plugins.MultiPoint.Enabled, gputopology.Name))
	for _, name := range slices.Sorted(maps.Keys(needsTopology)) {
		if d := needsTopology[name]; enabled[name] && !allocates {
			errs = append(errs, field.Invalid(path.Child("plugins"), name, fmt.Sprintf("%s %s, so without it in profile %s %s: enable %s there too",
				name, d.does, p.SchedulerName, d.without, gputopology.Name)))
		}
	}
	if enabled[cliqueplacement.Name] {
		errs = append(errs, checkGenerator(path.Child("plugins"), p)...)
	}
	return errs
}

// checkGenerator refuses a profile where GPUCliquePlacement would not be
// the one placement generator: the in-tree TopologyPlacementGenerator
// left on, or every generator dropped with '*' under placementGenerate,
// which drops GPUCliquePlacement's multiPoint entry there too.
func checkGenerator(path *field.Path, p schedconfig.KubeSchedulerProfile) field.ErrorList {
	generate := p.Plugins.PlacementGenerate
	dropsInTree := func(set schedconfig.PluginSet) bool {
		return has(set.Disabled, names.TopologyPlacementGenerator) || has(set.Disabled, "*")
	}
	switch {
	case has(generate.Disabled, "*") && !has(generate.Enabled, cliqueplacement.Name):
		return field.ErrorList{field.Invalid(path.Child("placementGenerate", "disabled"), "*", fmt.Sprintf(
			"disables every placement generator in profile %s, %s's multiPoint entry included: list %s under placementGenerate.enabled, or disable only %s",
			p.SchedulerName, cliqueplacement.Name, cliqueplacement.Name, names.TopologyPlacementGenerator))}
	case !dropsInTree(p.Plugins.MultiPoint) && !dropsInTree(generate):
		return field.ErrorList{field.Invalid(path, cliqueplacement.Name, fmt.Sprintf(
			"%s replaces the in-tree %s, and a profile takes one placement generator: disable %s under multiPoint in profile %s (kube-scheduler checks this only once the pod-group gates are on, and would then not start)",
			cliqueplacement.Name, names.TopologyPlacementGenerator, names.TopologyPlacementGenerator, p.SchedulerName))}
	}
	return nil
}

// has says whether the list names the plugin.
func has(list []schedconfig.Plugin, plugin string) bool {
	return slices.ContainsFunc(list, func(pl schedconfig.Plugin) bool { return pl.Name == plugin })
}

// takesNoArgs are gputopo's plugins without args.
var takesNoArgs = map[string]bool{consumable.Name: true, partitionable.Name: true}

// enabledPlugins are the plugins the profile enables at some extension
// point, multiPoint included.
func enabledPlugins(p *schedconfig.Plugins) map[string]bool {
	out := map[string]bool{}
	if p == nil {
		return out
	}
	for _, name := range p.Names() {
		out[name] = true
	}
	for _, set := range []schedconfig.PluginSet{p.MultiPoint, p.PodGroupPostFilter} {
		for _, pl := range set.Enabled {
			out[pl.Name] = true
		}
	}
	return out
}

// noSuchPlugin says which names there are: gputopo's, sorted, and
// kube-scheduler's (some thirty, not listed).
func noSuchPlugin(ours frameworkruntime.Registry) string {
	return "no plugin of this scheduler has this name (gputopo's: " + strings.Join(slices.Sorted(maps.Keys(ours)), ", ") +
		"; the others are kube-scheduler's in-tree plugins)"
}
