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
)

// CheckConfig finds what kube-scheduler's own validation lets through in
// a configuration with gputopo's plugins, and which would leave a user's
// intent silently unapplied:
//   - a pluginConfig entry that names no plugin of this scheduler
//     (kube-scheduler ignores it, so a misspelt GPUTopology would run on
//     its defaults without a word);
//   - a negative score weight for one of gputopo's plugins, which would
//     turn "the best placement" into "the worst".
func CheckConfig(cfg *schedconfig.KubeSchedulerConfiguration) error {
	ours := Registry()
	known := frameworkplugins.NewInTreeRegistry()
	maps.Copy(known, ours)
	var errs field.ErrorList
	for i, p := range cfg.Profiles {
		path := field.NewPath("profiles").Index(i)
		for j, pc := range p.PluginConfig {
			if _, ok := known[pc.Name]; !ok {
				errs = append(errs, field.Invalid(path.Child("pluginConfig").Index(j).Child("name"), pc.Name, noSuchPlugin(ours)))
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

// noSuchPlugin says which names there are: gputopo's, sorted, and
// kube-scheduler's (some thirty, not listed).
func noSuchPlugin(ours frameworkruntime.Registry) string {
	return "no plugin of this scheduler has this name (gputopo's: " + strings.Join(slices.Sorted(maps.Keys(ours)), ", ") +
		"; the others are kube-scheduler's in-tree plugins)"
}
