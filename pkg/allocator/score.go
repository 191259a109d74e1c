package allocator

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/pkg/topology"
)

// Quality explains an allocation on one node. "Before" values describe the
// node without this pod, the others with it.
type Quality struct {
	// Score is the policy objective of the chosen solution on this node;
	// only comparable between solutions on the same node.
	Score float64
	// MultiDevice is true when some claim got two or more devices that
	// publish topology; WorstLink is then the worst pair class among them.
	MultiDevice bool
	WorstLink   topology.LinkClass
	// Intactness of free NVLink groups (topology.Intactness).
	Intactness, IntactnessBefore float64
	// WholeGPUs is the node's whole GPUs with topology, free or not.
	WholeGPUs int
	// MIGPlaceable is the sum of squared sizes of partitions that still fit.
	MIGPlaceable, MIGPlaceableBefore float64
	// Fragmentation of shared devices, in GPUs (topology.Fragmentation).
	Fragmentation, FragmentationBefore float64
	// HostPressure of the CPU and memory of a pod without devices or with
	// a share of one GPU on the node's free GPUs, in GPUs
	// (topology.HostPressure; 0 for pods with whole GPUs and without the
	// node's CPU and memory).
	HostPressure float64
	// LinkSteps sums, over claims of two or more whole GPUs, how many link
	// classes worse than the best the node offers so many GPUs they are.
	LinkSteps int
	// PackingCost is what Packing minimizes: the growth of fragmentation,
	// plus the policy's HostPressure weight times HostPressure, plus its
	// LinkClassCost times LinkSteps; 0 with Packing off, so that
	// GPUConsumable, which scores it, then ranks no node above another.
	PackingCost float64
	// Request is what the allocation takes, as a workload class: its
	// devices, the share of a single shared device, the pod's CPU and
	// memory (when the node's were given). GPUs is 0 for no devices.
	Request topology.TaskClass
	// Explored counts the complete solutions compared.
	Explored int
	// Fallbacks sums, over firstAvailable requests, the index of the
	// alternative chosen: 0 when every request got its first choice.
	Fallbacks int
}

func (q Quality) String() string {
	link := "-"
	if q.MultiDevice {
		link = q.WorstLink.String()
	}
	return fmt.Sprintf("link=%s intactness=%.3f->%.3f migPlaceable=%.2f->%.2f fragmentation=%.3f->%.3f explored=%d",
		link, q.IntactnessBefore, q.Intactness, q.MIGPlaceableBefore, q.MIGPlaceable, q.FragmentationBefore, q.Fragmentation, q.Explored)
}

// solution is a complete allocation found by the search.
type solution struct {
	picks   [][]pick
	subs    [][]int
	quality Quality
	// binding counts the picks whose device has binding conditions.
	binding int
}

// beats reports whether the run's current solution, of quality q with
// binding picks whose device has binding conditions, is better than the
// best so far: a more preferred firstAvailable alternative always wins
// (the user's order), then fewer devices with binding conditions
// (upstream tries their pools last: a device that must be attached first
// is taken only where no other fits), then the higher policy score.
func (r *run) beats(q Quality, binding int) bool {
	b := r.best
	for c := range r.curSub {
		for g := range r.curSub[c] {
			if r.curSub[c][g] != b.subs[c][g] {
				return r.curSub[c][g] < b.subs[c][g]
			}
		}
	}
	if binding != b.binding {
		return binding < b.binding
	}
	return q.Score > b.quality.Score+1e-9
}

// bindingPicks counts the current picks whose device has binding
// conditions.
func (r *run) bindingPicks() int {
	n := 0
	for _, picks := range r.picks {
		for _, p := range picks {
			if len(r.view.devices[p.dev].api.BindingConditions) > 0 {
				n++
			}
		}
	}
	return n
}

func (r *run) snapshot(q Quality, binding int) *solution {
	sol := &solution{picks: make([][]pick, len(r.picks)), subs: make([][]int, len(r.curSub)), quality: q, binding: binding}
	for i := range r.picks {
		sol.picks[i] = append([]pick(nil), r.picks[i]...)
		sol.subs[i] = append([]int(nil), r.curSub[i]...)
	}
	return sol
}

// gpu returns the link-model view of a device, computed once.
func (d *device) gpu() topology.GPU {
	d.gpuOnce.Do(func() {
		d.gpuDesc = topology.Describe(d.slice.Spec.Driver, topology.DeviceNode(d.slice, d.api), d.api.Attributes)
	})
	return d.gpuDesc
}

// roles lists, once per node view, the devices each criterion looks at.
type roles struct {
	once      sync.Once
	wholeGPUs []int // whole GPUs with topology (topology.GPU.WholeGPU)
	groups    *topology.Groups
	// bestClass[n] is the best class n of the whole GPUs can have.
	bestClass []topology.LinkClass
	shared    []int // whole GPUs that allow multiple allocations, with capacity
	exclusive []int // whole GPUs that are not shared devices
	counted   []int // pools with shared counters
}

func (v *nodeView) roles() *roles {
	v.role.once.Do(func() {
		var gpus []topology.GPU
		for i, d := range v.devices {
			g := d.gpu()
			if g.WholeGPU() {
				v.role.wholeGPUs = append(v.role.wholeGPUs, i)
				gpus = append(gpus, g)
			}
			if d.multi && len(d.api.Capacity) > 0 && g.WholeGPU() {
				v.role.shared = append(v.role.shared, i)
			} else if g.WholeGPU() {
				v.role.exclusive = append(v.role.exclusive, i)
			}
		}
		v.role.groups = topology.NewGroups(gpus)
		for n := range len(gpus) + 1 {
			v.role.bestClass = append(v.role.bestClass, topology.BestClass(gpus, n))
		}
		for pi, p := range v.pools {
			if len(p.counterTotal) > 0 {
				v.role.counted = append(v.role.counted, pi)
			}
		}
	})
	return &v.role
}

// evaluate scores the current complete state of the run.
func (r *run) evaluate() Quality {
	if restore := r.liftAdminPicks(); restore != nil {
		defer restore()
	}
	var q Quality
	if r.before == nil {
		b := r.measure(false)
		r.before = &b
	}
	q.IntactnessBefore, q.MIGPlaceableBefore, q.FragmentationBefore = r.before.Intactness, r.before.MIGPlaceable, r.before.Fragmentation
	after := r.measure(true)
	q.Intactness, q.MIGPlaceable, q.Fragmentation = after.Intactness, after.MIGPlaceable, after.Fragmentation
	q.WholeGPUs = after.WholeGPUs
	q.Request = r.requestClass()
	q.HostPressure = r.hostPressure(q.Request)

	cost := 0
	for c := range r.picks {
		for picks := range r.linkGroups(r.picks[c]) {
			w, n := r.worstPair(picks)
			if n < 2 {
				continue
			}
			if !q.MultiDevice || w > q.WorstLink {
				q.WorstLink = w
			}
			q.MultiDevice = true
			cost += int(w)
			q.LinkSteps += r.linkSteps(picks, w)
		}
	}
	if r.pol.Packing.Enabled {
		q.PackingCost = q.Fragmentation - q.FragmentationBefore + r.pol.HostPressure*q.HostPressure +
			r.pol.LinkClassCost*float64(q.LinkSteps) + r.contention(q.Request)
	}
	if p := r.pol.Topology; p.Enabled {
		q.Score += p.Weight * (q.Intactness - 10*float64(cost))
	}
	if p := r.pol.MIG; p.Enabled {
		q.Score += p.Weight * (q.MIGPlaceable - q.MIGPlaceableBefore + lookaheadWeight*r.lookahead())
	}
	if p := r.pol.Packing; p.Enabled {
		q.Score -= p.Weight * q.PackingCost
	}
	return q
}

// requestClass describes the current picks as a workload class: a single
// shared device counts with the share it loses, anything else as whole
// devices, GPUs only (countsAsGPU).
func (r *run) requestClass() topology.TaskClass {
	c := topology.TaskClass{Share: 1, Weight: 1}
	var only int
	for _, picks := range r.picks {
		for _, pk := range picks {
			if countsAsGPU(r.view.devices[pk.dev].gpu()) {
				c.GPUs++
				only = pk.dev
			}
		}
	}
	if c.GPUs == 1 {
		for i, d := range r.view.roles().shared {
			if d == only {
				if taken := r.freeShare(i, d, false) - r.freeShare(i, d, true); taken > 0 && taken < 1 {
					c.Share = taken
				}
				break
			}
		}
	}
	c.CPUMilli, c.MemoryMiB = r.host.podRequest()
	return c
}

// countsAsGPU: a device counts in a request's GPUs if it is a whole GPU
// or a partition, or says nothing of what it is (a driver without the
// attributes gputopo reads); not if it is of another type (NVIDIA's
// compute-domain channel beside a pod's GPUs) or publishes nothing but a
// PCIe root or NUMA node (another driver's NIC), as WholeGPU judges.
func countsAsGPU(g topology.GPU) bool {
	return g.Partition || g.WholeGPU() || (g.Type == "" && !g.HasTopology())
}

// linkSteps is how many classes worse than the best the node offers so
// many GPUs a claim's whole GPUs are (worst, their worst pair); 0 for
// claims with anything but whole GPUs (partitions, devices without
// topology, another driver's NIC next to the GPU).
func (r *run) linkSteps(picks []pick, worst topology.LinkClass) int {
	for _, pk := range picks {
		if !r.view.devices[pk.dev].gpu().WholeGPU() {
			return 0
		}
	}
	best := r.view.roles().bestClass
	if len(picks) >= len(best) {
		return 0
	}
	return max(0, int(worst-best[len(picks)]))
}

// linkGroups yields the sets of a claim's picks whose links count
// together: the whole claim, whose containers may all use all of its
// devices, but for an extended-resource claim each container's picks
// apart, since the kubelet gives each container only the devices of its
// own requests: two containers of 2 GPUs each are served best by one
// NVLink pair each, not by four GPUs that are close as a whole. A plain
// init container also sees the requests of the containers after it, and
// that union is not scored as one: its own request counts alone.
func (r *run) linkGroups(picks []pick) iter.Seq[[]pick] {
	return func(yield func([]pick) bool) {
		if len(picks) < 2 || picks[0].q.container < 0 {
			yield(picks)
			return
		}
		r.linkScratch = append(r.linkScratch[:0], picks...)
		sorted := r.linkScratch
		slices.SortStableFunc(sorted, func(a, b pick) int { return a.q.container - b.q.container })
		for len(sorted) > 0 {
			n := 1
			for n < len(sorted) && sorted[n].q.container == sorted[0].q.container {
				n++
			}
			if !yield(sorted[:n]) {
				return
			}
			sorted = sorted[n:]
		}
	}
}

// worstPair is topology.WorstPair over the picks that publish topology,
// and how many do.
func (r *run) worstPair(picks []pick) (topology.LinkClass, int) {
	worst, n := topology.LinkSameGPU, 0
	for i, a := range picks {
		ga := r.view.devices[a.dev].gpu()
		if !ga.HasTopology() {
			continue
		}
		n++
		for _, b := range picks[i+1:] {
			if gb := r.view.devices[b.dev].gpu(); gb.HasTopology() {
				worst = max(worst, topology.Pair(ga, gb))
			}
		}
	}
	return worst, n
}

// measure computes the node-wide criteria without (withRun false) or with
// this run's tentative allocations.
func (r *run) measure(withRun bool) Quality {
	var q Quality
	ro := r.view.roles()
	if r.pol.Topology.Enabled && len(ro.wholeGPUs) > 0 {
		if r.intactScratch == nil {
			r.intactScratch = make([]int, ro.groups.ScratchSize())
		}
		q.Intactness = ro.groups.Intactness(func(i int) bool { return r.free(ro.wholeGPUs[i], withRun) }, r.intactScratch)
		q.WholeGPUs = len(ro.wholeGPUs)
	}
	if r.pol.MIG.Enabled {
		for _, pi := range ro.counted {
			q.MIGPlaceable += r.placeable(pi, withRun)
		}
	}
	if r.pol.Packing.Enabled && len(ro.shared)+len(ro.exclusive) > 0 {
		if r.fragScratch == nil {
			r.fragScratch = make([]float64, len(ro.shared)+len(ro.exclusive))
		}
		for i, d := range ro.shared {
			r.fragScratch[i] = r.freeShare(i, d, withRun)
		}
		// Whole GPUs count as free or not: the classes that need more
		// GPUs than a node has free strand them as they strand shares.
		for i, d := range ro.exclusive {
			r.fragScratch[len(ro.shared)+i] = 0
			if r.free(d, withRun) {
				r.fragScratch[len(ro.shared)+i] = 1
			}
		}
		excluded := 0.0
		if r.host != nil {
			excluded = r.host.Excluded
		}
		q.Fragmentation = r.nodeFragmentation(withRun).Of(r.fragScratch, excluded)
	}
	return q
}

// nodeFragmentation is the workload on the node's CPU and memory left
// without or with the run (all classes fit where the host is unknown).
func (r *run) nodeFragmentation(withRun bool) *topology.NodeFragmentation {
	i := 0
	if withRun {
		i = 1
	}
	if r.nodeFrag[i] == nil {
		var host *topology.Host
		if r.host != nil {
			h := r.host.Free
			if withRun {
				h = r.host.after()
			}
			host = &h
		}
		r.nodeFrag[i] = r.s.compiledWorkload().For(host)
	}
	return r.nodeFrag[i]
}

// contention is the GPUs the run takes that requests which may run on
// few nodes will miss: HostUse.Contention times the GPUs of req.
func (r *run) contention(req topology.TaskClass) float64 {
	if !r.pol.Packing.Enabled || r.host == nil {
		return 0
	}
	return r.host.Contention * float64(req.GPUs) * req.Share
}

// hostPressure is topology.HostPressure of a run that takes no device or
// a share of one shared device (req, its class). Pods with whole GPUs are
// left to fragmentation's classes: pressure on them broke up the free
// nodes that 8-GPU pods need (docs/scheduler.md). The free GPUs before
// the run are the same for every solution on the node: counted once.
func (r *run) hostPressure(req topology.TaskClass) float64 {
	if !r.pol.Packing.Enabled || r.host == nil || (req.GPUs != 0 && (req.GPUs != 1 || req.Share >= 1)) {
		return 0
	}
	if r.gpusBefore < 0 {
		r.gpusBefore = r.freeGPUs(false)
	}
	return topology.HostPressure(r.gpusBefore, r.freeGPUs(true), r.host.Free, r.host.Pod)
}

// freeGPUs is the node's free GPU capacity, in GPUs: the free share of
// every shared device and every free whole GPU that is not one, so that
// nodes of shared and of exclusive GPUs compare.
func (r *run) freeGPUs(withRun bool) float64 {
	ro := r.view.roles()
	free := 0.0
	for i, d := range ro.shared {
		free += r.freeShare(i, d, withRun)
	}
	for _, d := range ro.exclusive {
		if r.free(d, withRun) {
			free++
		}
	}
	return free
}

// free reports whether a device could be allocated whole right now.
func (r *run) free(d int, withRun bool) bool {
	dv := r.view.devices[d]
	if r.ledgerHolds(d) || (withRun && (len(r.owners[d]) > 0 || r.sharesOf(d) > 0)) {
		return false
	}
	if len(dv.api.ConsumesCounters) == 0 {
		return true
	}
	if !r.f.PartitionableDevices {
		return false
	}
	pi, li := r.view.locate(d)
	return r.fitsCounters(pi, r.view.pools[pi].usesOf(li), withRun)
}

func (r *run) fitsCounters(pi int, uses []counterUse, withRun bool) bool {
	pc := r.countersOf(pi)
	if pc.overdrawn {
		return false
	}
	for _, u := range uses {
		need := u.milli
		if withRun {
			need += r.used[pi][u.idx]
		}
		if need > pc.avail[u.idx] {
			return false
		}
	}
	return true
}

// shareBase is what the ledger already uses of a shared device.
type shareBase struct {
	ready bool
	usedF []float64 // in capNames order, nil when the ledger holds nothing
	full  bool      // allocated exclusively
}

// freeShare is the unused fraction of a shared device's most used
// capacity; i is its index in roles().shared.
func (r *run) freeShare(i, d int, withRun bool) float64 {
	if r.shareBases == nil {
		r.shareBases = make([]shareBase, len(r.view.roles().shared))
	}
	dv := r.view.devices[d]
	b := &r.shareBases[i]
	if !b.ready {
		b.ready = true
		b.full = r.ledgerExclusive(d)
		if held := r.s.state.AggregatedCapacity[dv.id]; held != nil {
			b.usedF = make([]float64, len(dv.capNames))
			for k, name := range dv.capNames {
				if h, ok := held[name]; ok && h != nil {
					b.usedF[k] = h.AsApproximateFloat64()
				}
			}
		}
	}
	if b.full || (withRun && len(r.owners[d]) > 0) {
		return 0
	}
	var pending []float64
	if withRun && r.sharesOf(d) > 0 {
		pending = r.pendingF[d]
	}
	used := 0.0
	for k, total := range dv.capTotalF {
		if total <= 0 {
			continue
		}
		u := 0.0
		if b.usedF != nil {
			u = b.usedF[k]
		}
		if pending != nil {
			u += pending[k]
		}
		used = math.Max(used, u/total)
	}
	return math.Max(0, 1-used)
}

// TopologyScore rates a node for the allocation's link quality, higher is
// better: each step of worst link class costs 12, damage to intact free
// NVLink groups up to about 27. A node that can only offer a less
// preferred firstAvailable alternative loses 1000 per step, so that nodes
// honoring the user's first choice always win (as upstream scores them).
func (q Quality) TopologyScore() float64 {
	s := 100.0 - 1000*float64(q.Fallbacks)
	if q.MultiDevice {
		s -= 12 * float64(q.WorstLink-topology.LinkSameGPU)
	}
	return s - 20*q.intactLoss()
}

// intactLoss is how much of the node's intact free groups the allocation
// breaks, scaled to an 8-GPU node. Intactness is normalized per node;
// scaling it back by the node's size makes nodes comparable, so that
// across nodes the allocation goes where it breaks the least
// (buddy-style best fit): a 4-GPU claim fills a free 4-GPU GB200 tray
// rather than half of a free 8-GPU DGX, and a 1-GPU claim goes to an
// already broken group.
func (q Quality) intactLoss() float64 {
	loss := math.Max(0, q.IntactnessBefore-q.Intactness)
	if q.WholeGPUs > 0 {
		loss *= float64(q.WholeGPUs*q.WholeGPUs) / 64
	}
	return loss
}

// MIGScore rates a node for how many large partitions stay placeable.
func (q Quality) MIGScore() float64 {
	return 100 - 25*math.Max(0, q.MIGPlaceableBefore-q.MIGPlaceable)
}

// PackingScore rates a node for the packing cost (the growth of
// fragmentation, plus host pressure and link classes) on an absolute scale: 50
// when the allocation leaves fragmentation as it was and takes no room
// from free GPUs, 0 when it costs one more GPU's worth of free capacity
// (or more), 100 when it puts one GPU's worth back to use. It is not
// stretched across the candidate nodes: a few hundredths of a GPU must
// not outweigh the spreading of CPU and memory the other plugins ask for.
func (q Quality) PackingScore() float64 {
	return 50 - 50*q.PackingCost
}
