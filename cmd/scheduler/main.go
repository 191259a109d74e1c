// Command scheduler is kube-scheduler with gputopo's plugins registered:
// every upstream flag works (--config, leader election, -v,
// --logging-format=json, --feature-gates, metrics and health endpoints,
// client-go and version metrics, registered by the same imports as
// cmd/kube-scheduler); a KubeSchedulerConfiguration enables the plugins in
// a profile (see manifests/scheduler).
//
// --version prints gputopo's version (and the Kubernetes release it is
// built on) instead of kube-scheduler's; see versionRequest.
package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // kubernetes_build_info
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/gputopo/gputopo/pkg/plugins/registry"
	"github.com/gputopo/gputopo/pkg/strictyaml"
	"github.com/gputopo/gputopo/pkg/version"
)

const program = "gputopo-scheduler"

func main() {
	if printed, _ := versionRequest(os.Args[1:]).Print(os.Stdout, program); printed {
		os.Exit(0) // stdout gone: nothing to tell
	}
	cmd := app.NewSchedulerCommand(registry.SchedulerOptions()...)
	cmd.Use = program // usage and errors name this binary, not kube-scheduler
	cmd.Long = program + " is kube-scheduler with gputopo's plugins registered (" +
		strings.Join(slices.Sorted(maps.Keys(registry.Registry())), ", ") + `).
Every kube-scheduler flag works; a KubeSchedulerConfiguration (--config) enables
the plugins in a profile that pods choose by schedulerName. See docs/scheduler.md
and manifests/scheduler.`
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		if f := c.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
			return checkConfigFile(f.Value.String())
		}
		return nil
	}
	if f := cmd.Flags().Lookup("version"); f != nil {
		f.Usage = "--version prints gputopo's version and the Kubernetes release it is built on, and quits; --version=raw adds the build information (module versions, build settings); --version=vX.Y.Z sets the Kubernetes version reported, as in kube-scheduler"
	}
	os.Exit(cli.Run(cmd))
}

// checkConfigFile refuses, before kube-scheduler reads it, a --config
// that kube-scheduler would take but not as meant (registry.CheckConfig),
// and names the field of a number that is not finite, which kube-scheduler
// refuses without saying where. What kube-scheduler reports well itself
// (a missing file, a syntax error, its own validation) is left to it.
func checkConfigFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if err := strictyaml.CheckFinite(data); err != nil {
		return fmt.Errorf("--config=%s: %w", path, err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		return nil
	}
	if err := registry.CheckConfig(cfg); err != nil {
		return fmt.Errorf("--config=%s: %w", path, err)
	}
	return nil
}

// versionRequest is what the command line's --version asks gputopo to
// print: "true" for --version or --version=true, "raw" for --version=raw,
// and "" when there is none, it is false, or it is kube-scheduler's
// --version=vX.Y.Z (which sets the reported Kubernetes version and does
// not quit), all left to kube-scheduler. The last --version wins, as in
// flag parsing; arguments after "--" are not flags.
//
// kube-scheduler's own --version (component-base's verflag) would print
// the Kubernetes library's version, unstamped in gputopo's builds; the
// arguments are read here, before the cobra command parses them.
func versionRequest(args []string) version.Request {
	var req version.Request
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--version" {
			req = version.RequestLine
			continue
		}
		if v, ok := strings.CutPrefix(a, "--version="); ok {
			req, _ = version.ParseRequest(v) // kube-scheduler's vX.Y.Z: ""
		}
	}
	return req
}
