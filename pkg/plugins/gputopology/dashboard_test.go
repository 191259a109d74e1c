package gputopology

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as cmd/scheduler: client-go's metrics, leader election's among them
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// dashboard is the Grafana dashboard the docs point operators to.
const dashboard = "../../../manifests/grafana/gputopo-dashboard.json"

// Every metric a panel of the dashboard queries is served by the
// scheduler: gputopo's, registered as New registers them, or
// kube-scheduler's own (leader election's once it elects).
func TestDashboardMetricsExist(t *testing.T) {
	registerMetrics()
	schedulermetrics.Register()
	registerLeaderElectionMetrics(t)
	panels := dashboardExprs(t, dashboard)
	if len(panels) == 0 {
		t.Fatalf("%s: no panel with a query", dashboard)
	}
	used := map[string]bool{}
	for panel, exprs := range panels {
		for _, expr := range exprs {
			names := metricNames(expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", panel, expr)
			}
			for _, name := range names {
				used[name] = true
				if !registered(name) {
					t.Errorf("panel %q queries %s, which neither gputopo nor kube-scheduler registers", panel, name)
				}
			}
		}
	}
	// kube-scheduler's metrics are gputopo's scheduler's only: a
	// cluster's own kube-scheduler serves them too.
	for panel, exprs := range panels {
		for _, expr := range exprs {
			if strings.Contains(expr, "scheduler_") && !strings.Contains(expr, "group by (instance) (gputopo_fleet_scrape_errors_total)") {
				t.Errorf("panel %q: %q does not keep to gputopo's scheduler instances", panel, expr)
			}
		}
	}
	// The gauges this dashboard exists for are on it.
	for _, name := range []string{"gputopo_fleet_gpus", "gputopo_fleet_stranded_gpus", "gputopo_fleet_nvlink_domains", "gputopo_fleet_cliques",
		"gputopo_fleet_mig_placeable", "gputopo_allocation_duration_seconds_bucket", "gputopo_allocated_link_class_total",
		"scheduler_pending_pods", "scheduler_scheduling_attempt_duration_seconds_bucket"} {
		if !used[name] {
			t.Errorf("no panel queries %s", name)
		}
	}
}

// The check fails for a name nobody registers, and for a histogram
// series whose histogram does not exist.
func TestDashboardCheckRejectsUnknownMetrics(t *testing.T) {
	registerMetrics()
	schedulermetrics.Register()
	for name, want := range map[string]bool{
		"gputopo_fleet_gpus":                                  true,
		"gputopo_allocation_duration_seconds_bucket":          true,
		"scheduler_scheduling_attempt_duration_seconds_count": true,
		"gputopo_fleet_free_gpus":                             false,
		"gputopo_allocation_latency_seconds_bucket":           false,
	} {
		if got := registered(name); got != want {
			t.Errorf("registered(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`max by (state) (gputopo_fleet_gpus)`: {"gputopo_fleet_gpus"},
		`histogram_quantile(0.99, sum by (le, result) (rate(gputopo_allocation_duration_seconds_bucket{result="allocated"}[$__rate_interval])))`: {"gputopo_allocation_duration_seconds_bucket"},
		`max(gputopo_fleet_stranded_gpus) / clamp_min(max(gputopo_fleet_gpus{state="free"}), 1)`:                                                 {"gputopo_fleet_gpus", "gputopo_fleet_stranded_gpus"},
		`sum without (instance) (rate(a_total[5m] offset 1h)) > bool on (job) group_left b`:                                                      {"a_total", "b"},
		`{__name__="x"}`: nil,
	} {
		if diff := cmp.Diff(want, metricNames(expr)); diff != "" {
			t.Errorf("metricNames(%q) (-want +got):\n%s", expr, diff)
		}
	}
}

// dashboardExprs reads every panel's queries, by panel title, rows'
// nested panels included.
func dashboardExprs(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]string{}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", path, err)
			}
			for _, target := range p.Targets {
				if target.Expr != "" {
					out[p.Title] = append(out[p.Title], target.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

var (
	// Parts of PromQL that are not metric names: strings, label
	// matchers, ranges and subqueries, grouping and matching label lists,
	// Grafana variables.
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVariable = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	// An identifier, and whether a "(" follows it (a function call).
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "inf", "nan"}
)

// metricNames are the metric names a PromQL expression selects, sorted.
func metricNames(expr string) []string {
	for _, re := range []*regexp.Regexp{promqlStrings, grafanaVariable, promqlMatchers, promqlRanges, promqlGrouping} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var out []string
	for _, loc := range promqlIdent.FindAllStringSubmatchIndex(expr, -1) {
		if loc[2] >= 0 { // a function or aggregation
			continue
		}
		if loc[0] > 0 && (expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // the tail of a number or duration (1e3, 5m)
		}
		name := expr[loc[0]:loc[1]]
		if slices.Contains(promqlKeywords, strings.ToLower(name)) || slices.Contains(out, name) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// registered reports whether the scheduler's registry (legacyregistry,
// which /metrics serves) holds a metric of that name, or a histogram or
// summary whose _bucket, _sum or _count series it is. Vectors with no
// series yet are not gathered, so it asks the registry itself: a probe
// of that name registers only where the name is free.
func registered(name string) bool {
	candidates := []string{name}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			candidates = append(candidates, base)
		}
	}
	for _, n := range candidates {
		probe := probeCollector{prometheus.NewDesc(n, "probe of the dashboard test", nil, nil)}
		if err := legacyregistry.Registerer().Register(probe); err != nil {
			// Taken: the same name with other labels or help, or the
			// same descriptor. An invalid name is no metric.
			return !strings.Contains(err.Error(), "is invalid")
		}
		legacyregistry.Registerer().Unregister(probe)
	}
	return false
}

type probeCollector struct{ desc *prometheus.Desc }

func (p probeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }
func (p probeCollector) Collect(chan<- prometheus.Metric)    {}

// registerLeaderElectionMetrics makes a leader elector, as kube-scheduler
// does at start: client-go registers its metrics then.
func registerLeaderElectionMetrics(t *testing.T) {
	t.Helper()
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"}, LockConfig: resourcelock.ResourceLockConfig{Identity: "test"}}
	_, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: "kube-scheduler", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
}
