// Package charts renders gputopo's Helm chart (charts/gputopo) with Helm's
// Go SDK the way `helm template` and `helm install` do: the chart's values
// coalesced with the caller's, checked against values.schema.json, the
// templates rendered by Helm's engine and the objects ordered by Helm's
// install order. Tests use it to compare the chart with the kustomize
// manifests and to install it on a real API server without a helm binary.
package charts

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// chartDir is the chart, embedded so that the render needs no checkout.
//
//go:embed all:gputopo
var chartDir embed.FS

// Manifest is one rendered object's YAML and the template it came from.
type Manifest struct {
	Template string // e.g. gputopo/templates/scheduler-deployment.yaml
	YAML     string
}

// Load reads the embedded chart.
func Load() (*chart.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(chartDir, "gputopo", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartDir.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: strings.TrimPrefix(p, "gputopo/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(files)
}

// Render renders the chart as release name in namespace with values over
// the chart's defaults, as `helm template name charts/gputopo -n namespace
// -f values` does, and returns the objects in Helm's install order.
func Render(name, namespace string, values map[string]any) ([]Manifest, error) {
	rendered, err := render(name, namespace, values)
	if err != nil {
		return nil, err
	}
	// NOTES.txt is shown to the user, not installed.
	for file := range rendered {
		if path.Ext(file) != ".yaml" {
			delete(rendered, file)
		}
	}
	_, sorted, err := releaseutil.SortManifests(rendered, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	out := make([]Manifest, 0, len(sorted))
	for _, m := range sorted {
		out = append(out, Manifest{Template: m.Name, YAML: m.Content})
	}
	return out, nil
}

// Notes renders the chart's NOTES.txt for the same inputs.
func Notes(name, namespace string, values map[string]any) (string, error) {
	rendered, err := render(name, namespace, values)
	if err != nil {
		return "", err
	}
	return rendered["gputopo/templates/NOTES.txt"], nil
}

// render runs Helm's engine over every template, values checked against
// the chart's schema first.
func render(name, namespace string, values map[string]any) (map[string]string, error) {
	c, err := Load()
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	opts := common.ReleaseOptions{Name: name, Namespace: namespace, IsInstall: true, Revision: 1}
	top, err := util.ToRenderValues(c, values, opts, nil)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, top)
}
