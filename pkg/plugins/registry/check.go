package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

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
//   - GPUConsumable or GPUPartitionable without GPUTopology, whose
//     measure they read;
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
		for _, scorer := range []string{consumable.Name, partitionable.Name} {
			if enabled[scorer] && !enabled[gputopology.Name] {
				errs = append(errs, field.Invalid(path.Child("plugins"), scorer, fmt.Sprintf(
					"%s scores nodes by what %s measures, so without it in profile %s every node scores the same: enable %s there too",
					scorer, gputopology.Name, p.SchedulerName, gputopology.Name)))
			}
		}
		for _, set := range []struct {
			point string
			set   schedconfig.PluginSet
		}{{"multiPoint", p.Plugins.MultiPoint}, {"score", p.Plugins.Score}} {
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
