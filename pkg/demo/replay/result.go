package replay

import (
	"context"
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gputopo/gputopo/pkg/demo/report"
	"github.com/gputopo/gputopo/pkg/inspect"
	"github.com/gputopo/gputopo/pkg/topology"
)

// Result turns an outcome into the report's figures. nodes maps the
// copy's node names to their shape.
func Result(ctx context.Context, client kubernetes.Interface, w Workload, out *Outcome, nodes map[string]string) (report.Result, error) {
	var slices *resourceapi.ResourceSliceList
	var claims *resourceapi.ResourceClaimList
	err := retryRead(func() (err error) {
		if slices, err = client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		claims, err = client.ResourceV1().ResourceClaims(out.Target.Namespace()).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return report.Result{}, err
	}
	v := inspect.NewFleetView(slices.Items, nodes)
	r := report.Result{Name: out.Target.Name, Duration: out.Duration, LinkClasses: map[string]int{}, Pending: map[string]int{}}
	for _, c := range topology.LinkClasses() {
		r.LinkClassOrder = append(r.LinkClassOrder, c.String())
	}
	served := map[string][2]int{} // kind -> served, arrived
	for _, p := range out.Pods {
		kind := w.Templates[p.Template].Kind
		s := served[kind]
		s[1]++
		if p.Bound || p.Left && len(p.Devices) > 0 {
			s[0]++
		}
		served[kind] = s
		switch {
		case p.Left:
		case p.Bound:
			r.PodsPlaced++
		default:
			r.PodsPending++
			r.Pending[p.Reason]++
		}
		if len(p.Devices) >= 2 && (p.Bound || p.Left) {
			var set []topology.GPU
			for _, d := range p.Devices {
				if g, ok := v.GPU(d); ok { // not another kind of device
					set = append(set, g)
				}
			}
			if len(set) >= 2 {
				r.LinkClasses[topology.WorstPair(set).String()]++
			}
		}
	}
	if out.Duration > 0 {
		r.PodsPerSecond = float64(r.PodsPlaced) / out.Duration.Seconds()
	}
	for _, pt := range out.Curve {
		r.Curve = append(r.Curve, report.Point{ArrivedPercent: pt.ArrivedPercent, UnallocatedPercent: pt.UnallocatedPercent})
	}
	if n := len(out.Curve); n > 0 {
		r.UnallocatedGPUPercent = out.Curve[n-1].UnallocatedPercent
		r.EndArrivedPercent = out.Curve[n-1].ArrivedPercent
	}
	r.Nodes = v.Occupancy(claims.Items)
	kinds := make([]string, 0, len(served))
	for k := range served {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		s := served[k]
		r.Extra = append(r.Extra, report.Figure{Label: k + " requests served", Value: float64(s[0]), Unit: fmt.Sprintf("of %d", s[1])})
	}
	if departs(w) && len(out.Curve) > 0 {
		// With departures the GPUs left unallocated at the end say little;
		// what the fleet held over the run does.
		r.Extra = append(r.Extra, report.Figure{Label: "GPUs held, averaged over the steps", Value: heldPercent(out.Curve), Unit: "%"})
	}
	return r, nil
}

// departs reports whether some pods of the workload leave.
func departs(w Workload) bool {
	for _, g := range w.Pods {
		if g.Leave != 0 {
			return true
		}
	}
	return false
}

// heldPercent is the share of the GPUs in use after each step, averaged
// over the steps.
func heldPercent(curve []Point) float64 {
	sum := 0.0
	for _, p := range curve {
		sum += 100 - p.UnallocatedPercent
	}
	return sum / float64(len(curve))
}
