package openb

import (
	"fmt"
	"sort"
)

// Point is one sample of the artifact's curve: after a pod's outcome,
// ArrivedPercent = 100 * milli-GPU requested by all pods arrived so far /
// capacity, UnallocatedPercent = 100 * (1 - milli-GPU allocated / capacity).
type Point struct{ ArrivedPercent, UnallocatedPercent float64 }

// Tracker records the curve while a scheduler replays a workload: call
// Arrive(pod) when the pod is submitted, then Placed or Rejected with its
// outcome. The artifact decides each pod before the next arrives; outcomes
// may come later (a real scheduler is asynchronous), but every point is
// then read with all arrivals so far, so a run should settle its pods before
// the curve is read at high arrivals.
type Tracker struct {
	capacity  int64
	requested int64
	allocated int64
	waiting   map[string]bool
	placed    int
	rejected  int
	points    []Point
}

// NewTracker starts a curve for a cluster of capacityMilli milli-GPU
// (CapacityMilli of its nodes). It panics on a capacity that is not
// positive: every percentage would be meaningless.
func NewTracker(capacityMilli int64) *Tracker {
	if capacityMilli <= 0 {
		panic(fmt.Sprintf("openb: tracker capacity %d milli-GPU, want > 0", capacityMilli))
	}
	return &Tracker{capacity: capacityMilli, waiting: map[string]bool{}}
}

// Arrive counts the pod's request as arrived workload.
// A pod name arriving twice before its outcome is a caller bug and panics.
func (t *Tracker) Arrive(p Pod) {
	if t.waiting[p.Name] {
		panic(fmt.Sprintf("openb: pod %q arrived twice", p.Name))
	}
	t.waiting[p.Name] = true
	t.requested += p.GPUMilliRequest()
}

// Placed records that the pod was allocated milli milli-GPU (normally its
// GPUMilliRequest; a scheduler that rounds shares up passes what it took).
func (t *Tracker) Placed(p Pod, milli int64) {
	t.settle(p)
	t.placed++
	t.allocated += milli
	t.record()
}

// Rejected records that the pod could not be placed; nothing is allocated.
func (t *Tracker) Rejected(p Pod) {
	t.settle(p)
	t.rejected++
	t.record()
}

func (t *Tracker) settle(p Pod) {
	if !t.waiting[p.Name] {
		panic(fmt.Sprintf("openb: outcome for pod %q that has not arrived", p.Name))
	}
	delete(t.waiting, p.Name)
}

func (t *Tracker) record() {
	t.points = append(t.points, Point{t.ArrivedPercent(), t.UnallocatedPercent()})
}

// ArrivedPercent is the arrived workload now, in % of capacity.
func (t *Tracker) ArrivedPercent() float64 {
	return 100 * float64(t.requested) / float64(t.capacity)
}

// UnallocatedPercent is the unallocated GPU share now, in % of capacity.
func (t *Tracker) UnallocatedPercent() float64 {
	return 100 * (1 - float64(t.allocated)/float64(t.capacity))
}

// PodsPlaced counts the pods bound so far.
func (t *Tracker) PodsPlaced() int { return t.placed }

// PodsRejected counts the pods found unschedulable so far.
func (t *Tracker) PodsRejected() int { return t.rejected }

// Points returns a copy of the curve, one point per outcome, in order.
func (t *Tracker) Points() []Point { return append([]Point(nil), t.points...) }

// At reads unallocated % at an arrived %, interpolating linearly between
// the outcomes around it; the curve starts at (0, 100) since nothing is
// allocated before anything arrives. Where several outcomes share an
// arrived value (CPU-only pods ask no GPU) the last one counts. When the
// run never reached arrived, ok is false and the value is the last one
// recorded, so a headline is never silently read off a short run.
func (t *Tracker) At(arrived float64) (unallocated float64, ok bool) {
	lo := Point{0, 100}
	if len(t.points) == 0 || arrived > t.points[len(t.points)-1].ArrivedPercent {
		if len(t.points) > 0 {
			lo = t.points[len(t.points)-1]
		}
		return lo.UnallocatedPercent, arrived <= 0
	}
	if arrived <= 0 {
		return 100, true
	}
	hi := sort.Search(len(t.points), func(i int) bool { return t.points[i].ArrivedPercent > arrived })
	if hi > 0 {
		lo = t.points[hi-1]
	}
	if lo.ArrivedPercent == arrived || hi == len(t.points) {
		return lo.UnallocatedPercent, true
	}
	h := t.points[hi]
	f := (arrived - lo.ArrivedPercent) / (h.ArrivedPercent - lo.ArrivedPercent)
	return lo.UnallocatedPercent + f*(h.UnallocatedPercent-lo.UnallocatedPercent), true
}
