package gputopology

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/topology"
)

// The fleet gauges: the state of every GPU the scheduler knows, computed
// when /metrics is scraped from the same shared DRA state GPUTopology
// allocates from (slices, allocated claims and in-flight allocations).
// No label names a node: 5,000 nodes would make 5,000 series per gauge.
var (
	fleetGPUsDesc = metrics.NewDesc(subsystem+"_fleet_gpus",
		"Whole GPUs by state: free (nothing allocated), partial (MIG partitions or shares allocated, room left), used (allocated whole, or no room left).",
		[]string{"state"}, nil, metrics.ALPHA, "")
	fleetTaintedDesc = metrics.NewDesc(subsystem+"_fleet_tainted_gpus",
		"Whole GPUs whose device carries a NoSchedule or NoExecute taint (only tolerating claims may take them), by their state as in gputopo_fleet_gpus.",
		[]string{"state"}, nil, metrics.ALPHA, "")
	fleetStrandedDesc = metrics.NewDesc(subsystem+"_fleet_stranded_gpus",
		"Free GPUs whose NVLink domain (or, for GPUs in none, node) has another GPU not free: a job wanting the whole domain cannot have them.",
		nil, nil, metrics.ALPHA, "")
	fleetDomainsDesc = metrics.NewDesc(subsystem+"_fleet_nvlink_domains",
		"Single-node NVLink domains: total, and free (every GPU free).",
		[]string{"state"}, nil, metrics.ALPHA, "")
	fleetCliquesDesc = metrics.NewDesc(subsystem+"_fleet_cliques",
		"Multi-node NVLink cliques (the GPUs' cliqueID, else the node's nvidia.com/gpu.clique label; e.g. GB200 NVL72 racks): total, and free (every GPU of every node free).",
		[]string{"state"}, nil, metrics.ALPHA, "")
	fleetMIGDesc = metrics.NewDesc(subsystem+"_fleet_mig_placeable",
		"Instances of each MIG profile that could still be allocated, that profile alone (profiles compete for the same slices: do not add them).",
		[]string{"profile"}, nil, metrics.ALPHA, "")
	fleetScrapeErrorsDesc = metrics.NewDesc(subsystem+"_fleet_scrape_errors_total",
		"Scrapes whose fleet gauges could not be computed (the scheduler's DRA state could not be read); the gauges are then absent.",
		nil, nil, metrics.ALPHA, "")
)

// fleetCollector computes the fleet gauges at scrape time. Its cost is
// O(devices + allocated device results): one pass over the slices, one
// read of the claim tracker's allocated state (as a scheduling cycle
// does), no per-node series. That is about 0.3 s of CPU on 5,000 nodes,
// so a summary is reused for maxAge: several scrapers (an HA Prometheus
// pair, a benchmark harness gathering every second) then cost no more
// than one scrape per maxAge.
type fleetCollector struct {
	metrics.BaseStableCollector

	mu sync.Mutex
	// source is the DRA manager of the newest GPUTopology instance: the
	// scheduler's one (profiles share it); in a process that starts
	// several schedulers (tests, the demo) the last one started.
	source fwk.SharedDRAManager
	// nodes lists the scheduler's nodes, for their clique labels.
	nodes  corelisters.NodeLister
	errors int
	// timeout bounds the read of the allocated state, which retries
	// while claims change.
	timeout time.Duration
	// maxAge: how long a summary is served again; 0 computes one per
	// scrape.
	maxAge time.Duration
	last   *cachedSummary
	// ignoreTaints: the DRADeviceTaints gate is off, so the scheduler
	// hands tainted devices out like any other; none counts as tainted.
	ignoreTaints bool
}

// cachedSummary is the last summary, of which source, and when.
type cachedSummary struct {
	source  fwk.SharedDRAManager
	at      time.Time
	summary topology.FleetSummary
}

var (
	_ metrics.StableCollector = &fleetCollector{}

	fleetMetrics = &fleetCollector{timeout: 2 * time.Second, maxAge: 10 * time.Second}
)

// setSource makes the collector read m and the nodes' clique labels
// from nodes (nil: none), with taints or not.
func (c *fleetCollector) setSource(m fwk.SharedDRAManager, nodes corelisters.NodeLister, taints bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.source, c.nodes, c.ignoreTaints = m, nodes, !taints
}

// DescribeWithStability implements metrics.StableCollector.
func (c *fleetCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range []*metrics.Desc{fleetGPUsDesc, fleetTaintedDesc, fleetStrandedDesc, fleetDomainsDesc, fleetCliquesDesc, fleetMIGDesc, fleetScrapeErrorsDesc} {
		ch <- d
	}
}

// CollectWithStability implements metrics.StableCollector. When the
// state cannot be read it logs, counts the error and emits no gauge:
// a wrong zero would read as an empty fleet.
func (c *fleetCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	source, nodes, timeout, last, ignoreTaints := c.source, c.nodes, c.timeout, c.last, c.ignoreTaints
	c.mu.Unlock()
	if source != nil {
		if last != nil && last.source == source && time.Since(last.at) < c.maxAge {
			emitFleet(ch, last.summary)
		} else if s, err := summarize(source, nodes, timeout); err == nil {
			if ignoreTaints {
				s.Tainted = map[string]int{}
			}
			c.mu.Lock()
			c.last = &cachedSummary{source: source, at: time.Now(), summary: s}
			c.mu.Unlock()
			emitFleet(ch, s)
		} else {
			klog.Background().Error(err, "Fleet metrics not computed")
			c.mu.Lock()
			c.errors++
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	failed := c.errors
	c.mu.Unlock()
	ch <- metrics.NewLazyConstMetric(fleetScrapeErrorsDesc, metrics.CounterValue, float64(failed))
}

// summarize reads the slices and allocated state and summarizes them. A
// panic on an unexpected object is an error here, not the scheduler's
// end.
func summarize(m fwk.SharedDRAManager, nodes corelisters.NodeLister, timeout time.Duration) (s topology.FleetSummary, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("summarize fleet: %v", r)
		}
	}()
	slices, err := m.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return s, fmt.Errorf("list ResourceSlices: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	state, err := GatherAllocatedState(ctx, m, true) // a scrape is rare; read it all
	if err != nil {
		return s, err
	}
	cliques, err := nodeCliques(nodes)
	if err != nil {
		return s, err
	}
	return topology.SummarizeFleet(slices, deviceUsage(state), cliques), nil
}

// nodeCliques is the clique label of every node that has one.
func nodeCliques(nodes corelisters.NodeLister) (map[string]string, error) {
	if nodes == nil {
		return nil, nil
	}
	all, err := nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := map[string]string{}
	for _, n := range all {
		if c := n.Labels[contract.LabelClique]; c != "" {
			out[n.Name] = c
		}
	}
	return out, nil
}

// deviceUsage reads what is allocated of each device from the ledger.
func deviceUsage(state *allocator.AllocatedState) topology.DeviceUsage {
	shared := make(map[structured.DeviceID]bool, len(state.AllocatedSharedDeviceIDs))
	for id := range state.AllocatedSharedDeviceIDs {
		shared[id.GetDeviceID()] = true
	}
	return func(driver, pool, device string) topology.DeviceUse {
		id := structured.MakeDeviceID(driver, pool, device)
		u := topology.DeviceUse{Exclusive: state.AllocatedDevices.Has(id), Shared: shared[id]}
		if c := state.AggregatedCapacity[id]; c != nil {
			u.Shared, u.Consumed = true, c
		}
		return u
	}
}

func emitFleet(ch chan<- metrics.Metric, s topology.FleetSummary) {
	gauge := func(d *metrics.Desc, v int, labels ...string) {
		ch <- metrics.NewLazyConstMetric(d, metrics.GaugeValue, float64(v), labels...)
	}
	gauge(fleetGPUsDesc, s.Free, topology.StateFree)
	gauge(fleetGPUsDesc, s.Partial, topology.StatePartial)
	gauge(fleetGPUsDesc, s.Used, topology.StateUsed)
	for _, state := range topology.GPUStates {
		gauge(fleetTaintedDesc, s.Tainted[state], state) // zero too: a taint lifted reads 0, not a stale series
	}
	gauge(fleetStrandedDesc, s.Stranded)
	gauge(fleetDomainsDesc, s.FreeNVLinkDomains, "free")
	gauge(fleetDomainsDesc, s.NVLinkDomains, "total")
	gauge(fleetCliquesDesc, s.FreeCliques, "free")
	gauge(fleetCliquesDesc, s.Cliques, "total")
	for profile, n := range s.MIGPlaceable {
		gauge(fleetMIGDesc, n, profile)
	}
}
