package gputopology

import (
	"fmt"
	"slices"
	"strings"

	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// inTreeDRA is the in-tree plugin that allocates claims too.
const inTreeDRA = "DynamicResources"

// pluginLister is the part of kube-scheduler's framework that lists the
// profile's plugins per extension point.
type pluginLister interface {
	ListPlugins() *schedconfig.Plugins
}

// checkProfile refuses a profile that enables DynamicResources next to
// GPUTopology: both would reserve and write the same claims (the API
// server then rejects the second reservation and the pod never binds).
// It also refuses GPUTopology at only some of the extension points that
// allocate: Filter alone fails every pod (PreFilter's state is missing),
// without Reserve or PreBind a pod binds with its claim unallocated or its
// devices stay in flight, and without PostFilter a claim allocated where
// its pod can no longer run is never freed, so the pod waits for good. The list of a profile's plugins is
// complete only after every plugin's New, so EventsToRegister, which
// kube-scheduler calls while it builds the scheduler, runs this check:
// the scheduler does not start.
func checkProfile(fh fwk.Handle) error {
	lister, ok := fh.(pluginLister)
	if !ok {
		return nil // not kube-scheduler's framework: nothing to compare with
	}
	p := lister.ListPlugins()
	points := []struct {
		name string
		set  schedconfig.PluginSet
	}{{"preFilter", p.PreFilter}, {"filter", p.Filter}, {"postFilter", p.PostFilter}, {"reserve", p.Reserve}, {"preBind", p.PreBind}}
	var missing []string
	for _, point := range points {
		if enables(point.set, inTreeDRA) {
			return fmt.Errorf("profile %q enables both %s and %s, which would both allocate the same ResourceClaims: disable %s in this profile",
				fh.ProfileName(), Name, inTreeDRA, inTreeDRA)
		}
		if !enables(point.set, Name) {
			missing = append(missing, point.name)
		}
	}
	// A framework whose profile lists the plugin nowhere built it by hand
	// (tests, the demo's replay); it has no points to compare. Names
	// leaves out podGroupPostFilter, which allocates nothing either.
	if len(missing) > 0 && (slices.Contains(p.Names(), Name) || enables(p.PodGroupPostFilter, Name)) {
		return fmt.Errorf("profile %q enables %s at only some of the extension points that allocate claims (not at %s): enable it at preFilter, filter, postFilter, reserve and preBind, through multiPoint, or, at a point that disables every plugin with '*', under that point's enabled list",
			fh.ProfileName(), Name, strings.Join(missing, ", "))
	}
	return nil
}

// enables says whether the set enables the plugin.
func enables(set schedconfig.PluginSet, plugin string) bool {
	return slices.ContainsFunc(set.Enabled, func(pl schedconfig.Plugin) bool { return pl.Name == plugin })
}
