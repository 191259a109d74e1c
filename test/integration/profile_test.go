package integration

import (
	"strings"
	"testing"
	"time"
)

// A profile that enables GPUTopology and leaves the in-tree
// DynamicResources on would have both plugins reserve the same claims:
// the scheduler refuses to start, naming both plugins.
func TestProfileWithBothDRAPluginsRefused(t *testing.T) {
	c := startCluster(t)
	cfg := schedulerConfigWith(t, gputopoOnly, c.schedulerKubeconfig(gputopoOnly), func(cfg map[string]any) {
		multiPoint := cfg["profiles"].([]any)[0].(map[string]any)["plugins"].(map[string]any)["multiPoint"].(map[string]any)
		var disabled []any
		for _, pl := range multiPoint["disabled"].([]any) {
			if pl.(map[string]any)["name"] != "DynamicResources" {
				disabled = append(disabled, pl)
			}
		}
		multiPoint["disabled"] = disabled
	})
	p := c.runScheduler("gputopo", cfg)
	if err := p.waitExit(c.ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, how := p.exited(); !strings.Contains(how, "exit status 1") {
		t.Errorf("scheduler ended with %q, want exit status 1", how)
	}
	log := tail(p.log, 5)
	if !strings.Contains(log, `profile \"gputopo-scheduler\" enables both GPUTopology and DynamicResources`) {
		t.Errorf("scheduler log does not name both plugins:\n%s", log)
	}
}
