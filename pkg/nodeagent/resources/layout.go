// Package resources turns discovered GPUs into the devices the node agent
// publishes: whole GPUs, MIG placements consuming their GPU's counters, or
// shared GPUs with capacity. The Layout also answers which GPU and MIG
// placement a published device name stands for, at prepare time.
package resources

import (
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// Device is one published device.
type Device struct {
	Name string
	GPU  *discovery.GPU
	Mode config.Mode
	// MIG is the profile of a MIG placement; nil for a whole GPU (also
	// in MIG mode, where the whole GPU consumes every slice).
	MIG       *discovery.MIGProfile
	Placement discovery.Placement
}

// Layout is the devices of one node.
type Layout struct {
	Driver  string
	Node    string
	Devices []Device
	// CounterSets of MIG GPUs, by GPU index.
	counterSet map[int]string
	byName     map[string]int
	// withheld devices are known by name (claims on them still prepare
	// and unprepare) but not published.
	withheld map[string]bool
	// devicePlugin: a device plugin advertises GPUs on the node
	// (SetDevicePlugin); meanwhile every device is published tainted
	// (DevicePluginTaintKey).
	devicePlugin bool
	cfg          config.Config
}

// NewLayout decides the devices of the node's GPUs under cfg.
func NewLayout(node string, gpus []discovery.GPU, cfg config.Config) (*Layout, error) {
	l := &Layout{Driver: cfg.DriverName, Node: node, counterSet: map[int]string{}, byName: map[string]int{}, withheld: map[string]bool{}, cfg: cfg}
	for i := range gpus {
		g := &gpus[i]
		mode := cfg.ModeOf(g.Index, g.Product)
		whole := Device{Name: fmt.Sprintf("gpu-%d", g.Index), GPU: g, Mode: mode}
		switch mode {
		case config.MIG:
			if !g.MIGEnabled && g.MIGPending {
				return nil, fmt.Errorf("GPU %d (%s, %s): configured mode %q but MIG mode is still off: it was enabled and takes effect at the GPU's next reset or the node's reboot", g.Index, g.UUID, g.Product, mode)
			}
			if g.MIGEnabled && len(g.MIGProfiles) == 0 {
				return nil, fmt.Errorf("GPU %d (%s, %s): configured mode %q but NVML gave no MIG placements to this process (it needs capability SYS_ADMIN: manifests/nodeagent-mig adds it)", g.Index, g.UUID, g.Product, mode)
			}
			if !g.MIGEnabled {
				return nil, fmt.Errorf("GPU %d (%s, %s): configured mode %q but MIG mode is off or unsupported; enable MIG on the GPU or choose mode %q for it", g.Index, g.UUID, g.Product, mode, config.Whole)
			}
			l.counterSet[g.Index] = whole.Name
			l.add(whole)
			for pi := range g.MIGProfiles {
				p := &g.MIGProfiles[pi]
				for _, pl := range p.Placements {
					l.add(Device{Name: migName(g.Index, p.Name, pl.Start), GPU: g, Mode: mode, MIG: p, Placement: pl})
				}
			}
		case config.Shared:
			if err := notMIG(g, mode); err != nil {
				return nil, err
			}
			if err := sharesFit(g, cfg.Shared); err != nil {
				return nil, err
			}
			l.add(whole)
		default:
			if err := notMIG(g, mode); err != nil {
				return nil, err
			}
			l.add(whole)
		}
	}
	return l, nil
}

// notMIG refuses a GPU offered whole or shared whose MIG mode is on, or
// was enabled and takes effect at its next reset: CUDA sees no device on
// a GPU in MIG mode without instances, and the pods it was handed out to
// would fail.
func notMIG(g *discovery.GPU, mode config.Mode) error {
	switch {
	case g.MIGEnabled:
		return fmt.Errorf("GPU %d (%s): configured mode %q but MIG mode is on; disable MIG or choose mode %q", g.Index, g.UUID, mode, config.MIG)
	case g.MIGPending:
		return fmt.Errorf("GPU %d (%s, %s): configured mode %q but MIG mode was enabled and takes effect at the GPU's next reset or the node's reboot; disable it again or choose mode %q", g.Index, g.UUID, g.Product, mode, config.MIG)
	}
	return nil
}

// sharesFit checks the shared request policy against the GPU's memory:
// the API server refuses a policy whose first step past the minimum
// (twice memoryStep) is more than the capacity, and a default larger
// than the GPU would let no share that asks for no memory fit.
func sharesFit(g *discovery.GPU, p config.SharedPolicy) error {
	if g.MemoryMiB == 0 {
		return fmt.Errorf("GPU %d (%s, %s): configured mode %q but NVML does not report its memory (unified memory), which shares are made of; choose mode %q for it", g.Index, g.UUID, g.Product, config.Shared, config.Whole)
	}
	memory := g.MemoryMiB * 1024 * 1024
	if 2*p.MemoryStep.Value() > memory {
		return fmt.Errorf("GPU %d (%s, %s, %d MiB): shared.memoryStep %s: two steps are more than the GPU's memory, and the API server refuses its request policy; choose a smaller step", g.Index, g.UUID, g.Product, g.MemoryMiB, p.MemoryStep.String())
	}
	if p.DefaultMemory.Value() > memory {
		return fmt.Errorf("GPU %d (%s, %s, %d MiB): shared.defaultMemory %s is more than the GPU's memory: no share that asks for no memory would fit", g.Index, g.UUID, g.Product, g.MemoryMiB, p.DefaultMemory.String())
	}
	return nil
}

// migName is a device name for a MIG placement: names may hold neither
// dots nor plus signs, so "1g.10gb" at slice 3 of GPU 2 is
// "gpu-2-mig-1g10gb-3".
func migName(gpu int, profile string, start int) string {
	p := strings.NewReplacer(".", "", "+", "-").Replace(profile)
	return fmt.Sprintf("gpu-%d-mig-%s-%d", gpu, p, start)
}

func (l *Layout) add(d Device) {
	l.byName[d.Name] = len(l.Devices)
	l.Devices = append(l.Devices, d)
}

// Device returns the device of a published name.
func (l *Layout) Device(name string) (Device, bool) {
	i, ok := l.byName[name]
	if !ok {
		return Device{}, false
	}
	return l.Devices[i], true
}

// WithholdOnly sets which devices of GPU index are left out of the
// published ones: the MIG partitions whose slices overlap one of
// placements, and the whole GPU when there is any (GPU instances that
// the agent did not create hold those slices). It returns the names
// withheld now and whether that changed.
func (l *Layout) WithholdOnly(index int, placements []discovery.Placement) (names []string, changed bool) {
	for _, d := range l.Devices {
		if d.GPU.Index != index || d.Mode != config.MIG {
			continue
		}
		hold := len(placements) > 0 && (d.MIG == nil || overlapsAny(d.Placement, placements))
		if hold != l.withheld[d.Name] {
			changed = true
		}
		if hold {
			l.withheld[d.Name] = true
			names = append(names, d.Name)
		} else {
			delete(l.withheld, d.Name)
		}
	}
	return names, changed
}

func overlapsAny(p discovery.Placement, others []discovery.Placement) bool {
	for _, o := range others {
		if p.Overlaps(o) {
			return true
		}
	}
	return false
}

// Pool is the name of the node's pool: the node name.
func (l *Layout) Pool() string { return l.Node }
