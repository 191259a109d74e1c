package gputopology

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/gputopo/gputopo/pkg/allocator"
	"github.com/gputopo/gputopo/pkg/topology"
)

func TestMetrics(t *testing.T) {
	registerMetrics()
	registerMetrics()      // idempotent
	linkClassTotal.Reset() // other tests of the package observe choices too
	observeAllocation(time.Now(), nil)
	observeAllocation(time.Now(), fmt.Errorf("%w: full", allocator.ErrUnsatisfiable))
	observeChoice(allocator.Quality{MultiDevice: true, WorstLink: topology.LinkNVLink, FragmentationBefore: 0.2, Fragmentation: 0.1, MIGPlaceableBefore: 1, MIGPlaceable: 0.5})

	want := `
# HELP gputopo_allocated_link_class_total [ALPHA] Pods whose claims got several GPUs, by the worst link class between them.
# TYPE gputopo_allocated_link_class_total counter
gputopo_allocated_link_class_total{class="nvlink"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "gputopo_allocated_link_class_total"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"gputopo_allocation_duration_seconds", "gputopo_fragmentation_delta_gpus", "gputopo_mig_placeability_loss"} {
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range families {
			found = found || f.GetName() == name
		}
		if !found {
			t.Errorf("metric %s not exported", name)
		}
	}
}
