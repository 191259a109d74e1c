package gputopology

import (
	"errors"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/gputopo/gputopo/pkg/allocator"
)

const subsystem = "gputopo"

var (
	allocationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem,
		Name:      "allocation_duration_seconds",
		Help:      "Time to allocate one pod's claims on one node, by result (allocated, unschedulable, error).",
		// Up to 10.5 s: past the shipped filterTimeout (10 s), so that a
		// Filter cut off there is not only in +Inf.
		Buckets:        metrics.ExponentialBuckets(0.00001, 4, 11),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	linkClassTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "allocated_link_class_total",
		Help:           "Pods whose claims got several GPUs, by the worst link class between them.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class"})
	fragmentationDelta = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "fragmentation_delta_gpus",
		Help:           "Change of expected GPU fragmentation (shares and whole GPUs) on the chosen node, in GPUs.",
		Buckets:        []float64{-0.5, -0.1, -0.01, 0, 0.01, 0.1, 0.5, 1},
		StabilityLevel: metrics.ALPHA,
	})
	migPlaceabilityLoss = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "mig_placeability_loss",
		Help:           "Loss of MIG placeability (sum of squared partition sizes) on the chosen node.",
		Buckets:        []float64{0, 0.05, 0.1, 0.25, 0.5, 1, 2},
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(allocationDuration, linkClassTotal, fragmentationDelta, migPlaceabilityLoss)
		legacyregistry.CustomMustRegister(fleetMetrics)
	})
}

func observeAllocation(start time.Time, err error) {
	result := "allocated"
	switch {
	case err == nil:
	case allocator.IsNodeLevel(err):
		result = "unschedulable"
	default: // invalid input, or an unexpected error
		result = "error"
	}
	allocationDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

func observeChoice(q allocator.Quality) {
	if q.MultiDevice {
		linkClassTotal.WithLabelValues(q.WorstLink.String()).Inc()
	}
	if q.Fragmentation != 0 || q.FragmentationBefore != 0 {
		fragmentationDelta.Observe(q.Fragmentation - q.FragmentationBefore)
	}
	if q.MIGPlaceableBefore > 0 {
		migPlaceabilityLoss.Observe(q.MIGPlaceableBefore - q.MIGPlaceable)
	}
}

// observeBindingWait feeds kube-scheduler's binding-condition metrics as
// the in-tree plugin does for a PreBind that waited: the wait's duration
// once per allocated device, and one allocation per device with binding
// conditions, by profile, driver and how the wait ended. kube-scheduler
// registers them with DRADeviceBindingConditions on; without a
// scheduler (unit tests) they do not exist.
func observeBindingWait(profile string, claims []*resourceapi.ResourceClaim, waited time.Duration, err error) {
	if schedmetrics.DRABindingConditionsAllocationsTotal == nil || schedmetrics.DRABindingConditionsPreBindDuration == nil {
		return
	}
	status := bindingWaitStatus(err)
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			schedmetrics.DRABindingConditionsPreBindDuration.WithLabelValues(profile, r.Driver, status).Observe(waited.Seconds())
			if len(r.BindingConditions) > 0 {
				schedmetrics.DRABindingConditionsAllocationsTotal.WithLabelValues(profile, r.Driver, status).Inc()
			}
		}
	}
}

// bindingWaitStatus is the in-tree plugin's label for how a wait ended.
func bindingWaitStatus(err error) string {
	switch {
	case err == nil:
		return schedmetrics.BindingConditionsStatusSuccess
	case errors.Is(err, errBindingTimeout):
		return schedmetrics.BindingConditionsStatusTimeout
	case errors.Is(err, errBindingFailed):
		return schedmetrics.BindingConditionsStatusFailed
	}
	return schedmetrics.BindingConditionsStatusError
}
