package gputopology

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/gputopo/gputopo/pkg/allocator"
)

const subsystem = "gputopo"

var (
	allocationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "allocation_duration_seconds",
		Help:           "Time to allocate one pod's claims on one node, by result (allocated, unschedulable, error).",
		Buckets:        metrics.ExponentialBuckets(0.00001, 4, 10),
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
