package topology

import (
	"math"
	"sort"
	"sync"
)

// Learner estimates the workload from the requests that arrive, so that
// fragmentation is measured against the mix a cluster really sees, not
// only the configured one. The configured workload is the prior: it
// counts as PriorWeight requests, so it decides while little has been
// seen and fades as requests arrive. Observed requests are merged into
// classes by GPU count, share (to 1%), CPU (whole cores, rounded up) and
// memory (GiB, rounded up), and the MaxClasses heaviest classes are kept:
// Fragmentation's cost grows with the number of classes. Past 16 x
// MaxClasses classes counted, all but the 8 x MaxClasses heaviest are
// dropped (foldClasses).
//
// Where requests may run is learned beside their size, as a count per
// placement key (an opaque encoding of the pods' node constraints, ""
// for none): Fragmentation takes the two as independent. The prior
// counts as a tenth of its weight of unconstrained requests, so that the
// first constrained pod does not rule out every other node for all
// requests to come. At most 4 x MaxClasses keys are remembered; the
// lightest beyond MaxClasses are then folded into the unconstrained
// count (a pod pinned to one node each would otherwise grow the map for
// ever).
type Learner struct {
	mu          sync.Mutex
	prior       Workload
	priorWeight float64
	maxClasses  int
	counts      map[TaskClass]float64
	placements  map[string]float64
	observed    float64
	folded      float64 // requests whose classes foldClasses dropped
	cached      Workload
	cachedWhere []Placement
	sinceBuild  int
}

// Placement is a constrained placement key and the share of the learned
// requests (prior included) that had it.
type Placement struct {
	Key   string
	Share float64
}

// NewLearner starts from prior (which must be valid), worth priorWeight
// requests, keeping at most maxClasses classes.
func NewLearner(prior Workload, priorWeight float64, maxClasses int) *Learner {
	l := &Learner{prior: prior, priorWeight: priorWeight, maxClasses: max(1, maxClasses),
		counts: map[TaskClass]float64{}, placements: map[string]float64{}}
	l.cached, l.cachedWhere = l.build(), l.buildPlacements()
	return l
}

// Observe counts one arriving request, with the key of where its pod may
// run; requests without GPUs and invalid classes are ignored.
func (l *Learner) Observe(c TaskClass, placement string) {
	key, ok := learnedClass(c)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[key]++
	if len(l.counts) > 16*l.maxClasses {
		l.foldClasses()
	}
	l.placements[placement]++
	if len(l.placements) > 4*l.maxClasses {
		l.foldPlacements()
	}
	l.observed++
	l.sinceBuild++
}

// Forget takes back one request Observe counted with the same class and
// placement key (a pod reserved, then not bound: it will be counted
// again when it is retried). A key folded away since is taken from the
// unconstrained count it was folded into; a class dropped since, from
// the requests of dropped classes.
func (l *Learner) Forget(c TaskClass, placement string) {
	key, ok := learnedClass(c)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.counts[key] > 0:
		takeOne(l.counts, key)
	case l.folded >= 1: // its class dropped since (foldClasses)
		l.folded--
	default:
		return // not counted
	}
	if _, kept := l.placements[placement]; !kept {
		placement = ""
	}
	takeOne(l.placements, placement)
	l.observed--
	l.sinceBuild++
}

// takeOne lowers m[k] by one, deleting it at zero.
func takeOne[K comparable](m map[K]float64, k K) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// learnedClass is the class c is counted in: shares to the percent, CPU
// to the core, memory to the GiB, as the workload's classes are; false
// for no GPU or an invalid class.
func learnedClass(c TaskClass) (TaskClass, bool) {
	if c.GPUs < 1 || c.Share <= 0 || c.Share > 1 || (c.GPUs > 1 && c.Share != 1) {
		return TaskClass{}, false
	}
	return TaskClass{
		GPUs:      c.GPUs,
		Share:     math.Min(1, math.Ceil(c.Share*100-1e-9)/100),
		CPUMilli:  (c.CPUMilli + 999) / 1000 * 1000,
		MemoryMiB: (c.MemoryMiB + 1023) / 1024 * 1024,
	}, true
}

// Observed is how many requests were counted (the prior not included).
func (l *Learner) Observed() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.observed
}

// Workload is the current estimate. It is rebuilt when the requests seen
// since the last build are 2% of all seen (at least one), so that a
// stream of requests does not pay for a sort each.
func (l *Learner) Workload() Workload {
	w, _ := l.Estimate()
	return w
}

// Estimate is the current estimate of the workload and of where its
// requests may run (heaviest first; the weights are request counts), from
// the same build.
func (l *Learner) Estimate() (Workload, []Placement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sinceBuild > 0 && float64(l.sinceBuild) >= 0.02*l.observed {
		l.cached, l.cachedWhere = l.build(), l.buildPlacements()
		l.sinceBuild = 0
	}
	return l.cached, l.cachedWhere
}

// buildPlacements keeps the maxClasses heaviest constrained keys, each
// with its share of every request counted (the prior's unconstrained
// ones included).
func (l *Learner) buildPlacements() []Placement {
	total := l.priorWeight / 10
	for _, n := range l.placements {
		total += n
	}
	out := make([]Placement, 0, len(l.placements))
	for k, n := range l.placements {
		if k != "" && total > 0 {
			out = append(out, Placement{Key: k, Share: n / total})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Share != out[j].Share {
			return out[i].Share > out[j].Share
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > l.maxClasses {
		out = out[:l.maxClasses]
	}
	return out
}

// foldPlacements keeps the maxClasses heaviest keys and counts the
// others as unconstrained.
func (l *Learner) foldPlacements() {
	keys := make([]string, 0, len(l.placements))
	for k := range l.placements {
		if k != "" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := l.placements[keys[i]], l.placements[keys[j]]; a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys[min(len(keys), l.maxClasses):] {
		l.placements[""] += l.placements[k]
		delete(l.placements, k)
	}
}

// foldClasses keeps the 8 x maxClasses heaviest classes (room for a
// class on the rise to reach the estimate's maxClasses) and drops the
// rest, as build drops all past maxClasses: pods sized one by one (a
// vertical autoscaler's requests) would otherwise grow the map, and
// every build's sort, for ever. The openb traces' requests fall in at
// most 415 classes, which no fold touches at the default 96.
func (l *Learner) foldClasses() {
	classes := make([]TaskClass, 0, len(l.counts))
	for c := range l.counts {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool {
		if a, b := l.counts[classes[i]], l.counts[classes[j]]; a != b {
			return a > b
		}
		return less(classes[i], classes[j])
	})
	for _, c := range classes[min(len(classes), 8*l.maxClasses):] {
		l.folded += l.counts[c]
		delete(l.counts, c)
	}
}

func (l *Learner) build() Workload {
	var priorSum float64
	for _, c := range l.prior {
		priorSum += c.Weight
	}
	w := make(Workload, 0, len(l.prior)+len(l.counts))
	for _, c := range l.prior {
		if priorSum > 0 && l.priorWeight > 0 {
			c.Weight = c.Weight / priorSum * l.priorWeight
			w = append(w, c)
		}
	}
	for c, n := range l.counts {
		c.Weight = n
		w = append(w, c)
	}
	sort.Slice(w, func(i, j int) bool {
		if w[i].Weight != w[j].Weight {
			return w[i].Weight > w[j].Weight
		}
		return less(w[i], w[j])
	})
	if len(w) > l.maxClasses {
		w = w[:l.maxClasses]
	}
	return w
}

// less orders classes of equal weight, so that a build does not depend on
// map order.
func less(a, b TaskClass) bool {
	switch {
	case a.GPUs != b.GPUs:
		return a.GPUs < b.GPUs
	case a.Share != b.Share:
		return a.Share < b.Share
	case a.CPUMilli != b.CPUMilli:
		return a.CPUMilli < b.CPUMilli
	default:
		return a.MemoryMiB < b.MemoryMiB
	}
}
