package allocator

import (
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// problem is one randomly generated allocation problem.
type problem struct {
	features Features
	node     *v1.Node
	slices   []*resourceapi.ResourceSlice
	classes  classList
	state    *AllocatedState
	claims   []*resourceapi.ResourceClaim
	// kind is the edge kind the problem was made to contain, if any
	// (gen_edges_test.go).
	kind edgeKind
	// variations applied to it (gen_variations_test.go).
	variations []variation
	// host is the node's CPU and memory, nil when not counted.
	host *HostUse
}

// classList implements DeviceClassLister over a slice.
type classList []*resourceapi.DeviceClass

func (l classList) List() ([]*resourceapi.DeviceClass, error) { return l, nil }
func (l classList) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

const (
	drvGPU = "gpu.example.com"
	drvNIC = "nic.example.com"
)

type gen struct {
	r    *rand.Rand
	kind edgeKind
	// devices created so far, for the ledger.
	devices []genDevice
}

type genDevice struct {
	driver, pool string
	dev          *resourceapi.Device
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }
func (g *gen) n(k int) int           { return g.r.IntN(k) }

// upTo returns how many of a series of ever less likely steps happen:
// upTo(0.4, 0.1) is 0 with 60%, 1 with 36%, 2 with 4%.
func (g *gen) upTo(ps ...float64) int {
	n := 0
	for _, p := range ps {
		if !g.chance(p) {
			break
		}
		n++
	}
	return n
}

func oneOf[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func newProblem(seed uint64) *problem {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	g.kind = g.edgeKind()
	p := &problem{features: DefaultFeatures(), kind: g.kind}
	if g.chance(0.1) {
		f := &p.features
		f.AdminAccess, f.PrioritizedList, f.PartitionableDevices = g.chance(0.5), g.chance(0.5), g.chance(0.5)
		f.DeviceTaints, f.DeviceBindingAndStatus, f.ConsumableCapacity = g.chance(0.5), g.chance(0.5), g.chance(0.5)
		f.FractionalCapacityRange = f.ConsumableCapacity && g.chance(0.5)
	}
	if g.kind == edgeStablePath {
		p.features = g.stableFeatures()
	}
	p.node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{"zone": oneOf(g, "a", "b")}}}
	nodes := []string{"node-0", "node-1"}
	for _, n := range nodes {
		for pi := 0; pi < 1+g.n(2); pi++ {
			p.slices = append(p.slices, g.localPool(n, fmt.Sprintf("%s-p%d", n, pi))...)
		}
	}
	if g.chance(0.3) || g.kind == edgeSliceSelectorTerms {
		p.slices = append(p.slices, g.networkPool("net")...)
	}
	if g.chance(0.2) || g.kind == edgeDeviceSelectorTerms {
		p.slices = append(p.slices, g.perDevicePool("perdev")...)
	}
	g.addEdges(p.slices)
	g.r.Shuffle(len(p.slices), func(i, j int) { p.slices[i], p.slices[j] = p.slices[j], p.slices[i] })
	p.classes = g.classes()
	p.state = g.state()
	for ci := 0; ci < 1+g.upTo(0.4, 0.15); ci++ {
		p.claims = append(p.claims, g.claim(ci, p.classes))
	}
	g.edgeClaims(p.claims)
	g.vary(p)
	return p
}

func (g *gen) attrs(model bool) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	if model || g.chance(0.85) {
		a["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To(oneOf(g, "a100", "h100", "l4"))}
	}
	if g.chance(0.85) {
		a["mem"] = resourceapi.DeviceAttribute{IntValue: ptr.To(oneOf[int64](g, 16, 40, 80))}
	}
	if g.chance(0.5) {
		a["healthy"] = resourceapi.DeviceAttribute{BoolValue: ptr.To(g.chance(0.8))}
	}
	if g.chance(0.4) {
		a["ver"] = resourceapi.DeviceAttribute{VersionValue: ptr.To(oneOf(g, "1.0.0", "2.1.0"))}
	}
	if g.chance(0.3) {
		a["resource.kubernetes.io/pcieRoot"] = resourceapi.DeviceAttribute{StringValue: ptr.To(oneOf(g, "pci0", "pci1"))}
	}
	if g.chance(0.03) {
		// Same attribute name, other type: constraints must not match.
		a["mem"] = resourceapi.DeviceAttribute{StringValue: ptr.To("40")}
	}
	if v, ok := a["model"]; ok && g.chance(0.1) {
		// The same attribute fully qualified: CEL and constraints read
		// both forms alike (twin skipping must too).
		delete(a, "model")
		a["gpu.example.com/model"] = v
	}
	return a
}

func (g *gen) device(name string, shared bool) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: g.attrs(false)}
	if g.chance(0.5) || shared {
		d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse(oneOf(g, "40Gi", "80Gi"))},
		}
		if g.chance(0.3) {
			d.Capacity["cores"] = resourceapi.DeviceCapacity{Value: resource.MustParse("100")}
		}
	}
	if shared {
		d.AllowMultipleAllocations = ptr.To(true)
		c := d.Capacity["memory"]
		switch g.n(4) {
		case 0:
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("10Gi")),
				ValidValues: []resource.Quantity{resource.MustParse("10Gi"), resource.MustParse("20Gi"), resource.MustParse("40Gi")}}
		case 1:
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("8Gi")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("8Gi")), Step: ptr.To(resource.MustParse("8Gi")), Max: ptr.To(resource.MustParse("40Gi"))}}
		case 2:
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi"))}}
		}
		d.Capacity["memory"] = c
		if g.chance(0.3) {
			d.Capacity["cores"] = resourceapi.DeviceCapacity{Value: resource.MustParse("100"),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("25")),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("500m")), Step: ptr.To(resource.MustParse("500m"))}}}
		}
	}
	if g.chance(0.12) {
		d.Taints = []resourceapi.DeviceTaint{{Key: oneOf(g, "broken", "maint"), Value: "x", Effect: oneOf(g, resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone)}}
	}
	if g.chance(0.06) {
		d.BindingConditions = []string{"attached"}
		d.BindingFailureConditions = []string{"failed"}
		d.BindsToNode = ptr.To(g.chance(0.5))
	}
	return d
}

func (g *gen) localPool(node, pool string) []*resourceapi.ResourceSlice {
	driver := oneOf(g, drvGPU, drvGPU, drvNIC)
	gen := int64(1 + g.n(2))
	nSlices := 1 + g.n(2)
	count := int64(nSlices)
	if g.chance(0.08) || (g.kind == edgeStablePath && g.chance(0.15)) {
		count++ // incomplete
	}
	partitionable := g.chance(0.3) || (g.kind.wantsCounters() && g.chance(0.7))
	var out []*resourceapi.ResourceSlice
	if partitionable {
		count++
	}
	for si := 0; si < nSlices; si++ {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-s%d", pool, si)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
				NodeName: ptr.To(node),
			},
		}
		nDev := 1 + g.n(5)
		for di := 0; di < nDev; di++ {
			name := fmt.Sprintf("dev-%d-%d", si, di)
			if g.chance(0.03) && di > 0 {
				name = fmt.Sprintf("dev-%d-%d", si, 0) // duplicate name: invalid pool
			}
			d := g.device(name, g.chance(0.2))
			if partitionable {
				cs := oneOf(g, "gpu-0", "gpu-1")
				d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
					CounterSet: cs,
					Counters: map[string]resourceapi.Counter{
						"mem":   {Value: resource.MustParse(oneOf(g, "10Gi", "20Gi", "40Gi"))},
						"slice": {Value: resource.MustParse(oneOf(g, "1", "2", "4"))},
					},
				}}
				if g.chance(0.03) || (g.kind == edgeStablePath && g.chance(0.05)) {
					d.ConsumesCounters[0].CounterSet = "missing" // invalid pool
				}
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		out = append(out, s)
	}
	if partitionable {
		out = append(out, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: pool + "-counters"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
				NodeName: ptr.To(node),
				SharedCounters: []resourceapi.CounterSet{
					{Name: "gpu-0", Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse("40Gi")}, "slice": {Value: resource.MustParse("4")}}},
					{Name: "gpu-1", Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse("40Gi")}, "slice": {Value: resource.MustParse("4")}}},
				},
			},
		})
	}
	if g.chance(0.1) {
		// An obsolete slice of an older generation.
		old := out[0].DeepCopy()
		old.Name += "-old"
		old.Spec.Pool.Generation = gen - 1
		out = append(out, old)
	}
	for _, s := range out {
		for i := range s.Spec.Devices {
			g.devices = append(g.devices, genDevice{driver, pool, &s.Spec.Devices[i]})
		}
	}
	return out
}

func (g *gen) networkPool(pool string) []*resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-s0"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvNIC, Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
		},
	}
	if g.chance(0.5) {
		s.Spec.AllNodes = ptr.To(true)
	} else {
		s.Spec.NodeSelector = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{oneOf(g, "a", "b")}}},
		}}}
	}
	for di := 0; di < 1+g.n(3); di++ {
		s.Spec.Devices = append(s.Spec.Devices, g.device(fmt.Sprintf("nic-%d", di), g.chance(0.2)))
	}
	for i := range s.Spec.Devices {
		g.devices = append(g.devices, genDevice{drvNIC, pool, &s.Spec.Devices[i]})
	}
	return []*resourceapi.ResourceSlice{s}
}

func (g *gen) perDevicePool(pool string) []*resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-s0"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: drvGPU, Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			PerDeviceNodeSelection: ptr.To(true),
		},
	}
	for di := 0; di < 1+g.n(3); di++ {
		d := g.device(fmt.Sprintf("pd-%d", di), false)
		switch g.n(3) {
		case 0:
			d.NodeName = ptr.To(oneOf(g, "node-0", "node-1"))
		case 1:
			d.AllNodes = ptr.To(true)
		case 2:
			d.NodeSelector = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{oneOf(g, "a", "b")}}},
			}}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	for i := range s.Spec.Devices {
		g.devices = append(g.devices, genDevice{drvGPU, pool, &s.Spec.Devices[i]})
	}
	return []*resourceapi.ResourceSlice{s}
}

func celSel(expr string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}
}

func opaque(driver, text string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"v":"` + text + `"}`)},
	}}
}

func (g *gen) classes() classList {
	cls := classList{
		{ObjectMeta: metav1.ObjectMeta{Name: "any"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{celSel(`device.driver == "gpu.example.com"`)},
			Config:    []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaque(drvGPU, "class-gpu")}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{celSel(`"mem" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].mem >= 40`)},
		}},
		// Errors at run time on devices without the attribute.
		{ObjectMeta: metav1.ObjectMeta{Name: "strict"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{celSel(`device.attributes[device.driver].mem >= 40`)},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{celSel(`device.allowMultipleAllocations`)},
			Config:    []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaque(drvGPU, "c1")}, {DeviceConfiguration: opaque(drvGPU, "c2")}},
		}},
	}
	if g.chance(0.03) {
		cls = append(cls, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{celSel(`device.attributes[`)},
		}})
	}
	return cls
}

func (g *gen) requestSelectors() []resourceapi.DeviceSelector {
	switch g.n(8) {
	case 0:
		if g.chance(0.3) {
			// Errors at run time on NIC devices.
			return []resourceapi.DeviceSelector{celSel(`device.attributes["gpu.example.com"].model == "h100"`)}
		}
		return []resourceapi.DeviceSelector{celSel(`device.attributes["gpu.example.com"].?model.orValue("") == "h100"`)}
	case 1:
		return []resourceapi.DeviceSelector{celSel(`"model" in device.attributes[device.driver] && device.attributes[device.driver].model != "l4"`)}
	case 2:
		if g.chance(0.2) {
			// Errors at run time on devices without capacity.
			return []resourceapi.DeviceSelector{celSel(`device.capacity[device.driver].memory.compareTo(quantity("40Gi")) >= 0`)}
		}
		return []resourceapi.DeviceSelector{celSel(`"memory" in device.capacity[device.driver] && device.capacity[device.driver].memory.compareTo(quantity("40Gi")) >= 0`)}
	case 3:
		return []resourceapi.DeviceSelector{celSel(`!("healthy" in device.attributes[device.driver]) || device.attributes[device.driver].healthy`)}
	}
	return nil
}

func (g *gen) className(classes classList) string {
	if g.chance(0.007) {
		return "missing"
	}
	c := oneOf(g, classes...).Name
	if c == "strict" && g.chance(0.7) {
		c = "any"
	}
	return c
}

func (g *gen) capacityRequest() *resourceapi.CapacityRequirements {
	if !g.chance(0.35) {
		return nil
	}
	c := &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		"memory": resource.MustParse(oneOf(g, "5Gi", "10Gi", "15Gi", "30Gi", "40Gi", "64Gi")),
	}}
	if g.chance(0.2) {
		c.Requests["cores"] = resource.MustParse(oneOf(g, "10", "1200m", "50"))
	}
	if g.chance(0.05) {
		c.Requests["unknown"] = resource.MustParse("1")
	}
	return c
}

func (g *gen) tolerations() []resourceapi.DeviceToleration {
	if !g.chance(0.25) {
		return nil
	}
	return []resourceapi.DeviceToleration{{Key: oneOf(g, "broken", "maint"), Operator: resourceapi.DeviceTolerationOpExists}}
}

func (g *gen) claim(ci int, classes classList) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("claim-%d", ci), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", ci)),
	}}
	nReq := 1 + g.upTo(0.4, 0.1)
	var names []string
	for ri := 0; ri < nReq; ri++ {
		name := fmt.Sprintf("r%d", ri)
		names = append(names, name)
		r := resourceapi.DeviceRequest{Name: name}
		if g.chance(0.25) {
			for si := 0; si < 2+g.n(2); si++ {
				r.FirstAvailable = append(r.FirstAvailable, resourceapi.DeviceSubRequest{
					Name: fmt.Sprintf("s%d", si), DeviceClassName: g.className(classes),
					Selectors: g.requestSelectors(), AllocationMode: resourceapi.DeviceAllocationModeExactCount,
					Count: int64(1 + g.upTo(0.3, 0.2)), Tolerations: g.tolerations(), Capacity: g.capacityRequest(),
				})
				names = append(names, name+"/"+r.FirstAvailable[si].Name)
			}
		} else {
			e := &resourceapi.ExactDeviceRequest{
				DeviceClassName: g.className(classes), Selectors: g.requestSelectors(),
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(1 + g.upTo(0.3, 0.15)),
				Tolerations: g.tolerations(), Capacity: g.capacityRequest(),
			}
			if g.chance(0.07) {
				e.AllocationMode, e.Count = resourceapi.DeviceAllocationModeAll, 0
			}
			if g.chance(0.06) {
				e.AdminAccess = ptr.To(true)
			}
			r.Exactly = e
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, r)
	}
	if g.chance(0.35) {
		attr := oneOf(g, "gpu.example.com/model", "gpu.example.com/mem", "nic.example.com/model", "resource.kubernetes.io/pcieRoot", "gpu.example.com/ver")
		con := resourceapi.DeviceConstraint{}
		if g.chance(0.6) {
			con.MatchAttribute = ptr.To(resourceapi.FullyQualifiedName(attr))
		} else {
			con.DistinctAttribute = ptr.To(resourceapi.FullyQualifiedName(attr))
		}
		if g.chance(0.5) {
			con.Requests = []string{oneOf(g, names...)}
		}
		c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, con)
	}
	if g.chance(0.3) {
		cfg := resourceapi.DeviceClaimConfiguration{DeviceConfiguration: opaque(drvGPU, "claim")}
		if g.chance(0.6) {
			cfg.Requests = []string{oneOf(g, names...)}
		}
		c.Spec.Devices.Config = append(c.Spec.Devices.Config, cfg)
	}
	return c
}

func (g *gen) state() *AllocatedState {
	s := &AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for i, d := range g.devices {
		if !g.chance(0.15) {
			continue
		}
		id := structured.MakeDeviceID(d.driver, d.pool, d.dev.Name)
		if ptr.Deref(d.dev.AllowMultipleAllocations, false) && g.chance(0.8) {
			uid := types.UID(fmt.Sprintf("share-%d", i))
			s.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &uid))
			s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, map[resourceapi.QualifiedName]resource.Quantity{
				"memory": resource.MustParse(oneOf(g, "8Gi", "16Gi", "40Gi")),
			}))
			continue
		}
		s.AllocatedDevices.Insert(id)
	}
	return s
}
