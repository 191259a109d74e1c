package gputopology

import (
	"fmt"
	"slices"

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
// The list of a profile's plugins is complete only after every plugin's
// New, so EventsToRegister, which kube-scheduler calls while it builds
// the scheduler, runs this check: the scheduler does not start.
func checkProfile(fh fwk.Handle) error {
	lister, ok := fh.(pluginLister)
	if !ok {
		return nil // not kube-scheduler's framework: nothing to compare with
	}
	p := lister.ListPlugins()
	for _, set := range []schedconfig.PluginSet{p.PreFilter, p.Filter, p.Reserve, p.PreBind} {
		if slices.ContainsFunc(set.Enabled, func(pl schedconfig.Plugin) bool { return pl.Name == inTreeDRA }) {
			return fmt.Errorf("profile %q enables both %s and %s, which would both allocate the same ResourceClaims: disable %s in this profile",
				fh.ProfileName(), Name, inTreeDRA, inTreeDRA)
		}
	}
	return nil
}
