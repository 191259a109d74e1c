// Package prepare applies the scheduler's allocations on the node: it
// writes a CDI spec per claim, creates MIG instances for MIG partitions
// (and destroys them at unprepare), refuses a device already prepared for
// another claim, and keeps a checkpoint so that a restarted agent neither
// loses nor duplicates prepared claims.
package prepare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// Options of a Preparer.
type Options struct {
	// CheckpointPath is the checkpoint file.
	CheckpointPath string
	// CDIDir is where CDI specs go (the runtime reads /var/run/cdi).
	CDIDir string
}

// Preparer prepares and unprepares claims on one node.
type Preparer struct {
	mu     sync.Mutex
	lib    nvml.Interface
	layout *resources.Layout
	cdi    *cdi.Cache
	path   string
	claims map[string]Claim
}

// ErrConflict: a device is already prepared for another claim.
var ErrConflict = errors.New("device already prepared for another claim")

// New loads the checkpoint and initializes NVML (for MIG instances).
func New(lib nvml.Interface, layout *resources.Layout, o Options) (*Preparer, error) {
	if o.CheckpointPath == "" || o.CDIDir == "" {
		return nil, errors.New("prepare: checkpoint path and CDI directory are required")
	}
	claims, err := loadCheckpoint(o.CheckpointPath)
	if err != nil {
		return nil, err
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(o.CDIDir), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI directory %s: %w", o.CDIDir, err)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML init: %s", nvml.ErrorString(ret))
	}
	return &Preparer{lib: lib, layout: layout, cdi: cache, path: o.CheckpointPath, claims: claims}, nil
}

// Close releases NVML.
func (p *Preparer) Close() { p.lib.Shutdown() }

// Claims returns the checkpointed claims.
func (p *Preparer) Claims() []Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Claim
	for _, c := range p.claims {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Claim) int {
		if a.UID < b.UID {
			return -1
		}
		if a.UID > b.UID {
			return 1
		}
		return 0
	})
	return out
}

// Prepare prepares a claim; preparing it again returns the same devices.
func (p *Preparer) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid := string(claim.UID)
	if c, ok := p.claims[uid]; ok && c.Prepared {
		return p.result(c), nil
	}
	c, err := p.plan(claim)
	if err != nil {
		return nil, err
	}
	if old, ok := p.claims[uid]; ok {
		c = resume(c, old) // a prepare interrupted by a crash
	}
	p.claims[uid] = c
	if err := saveCheckpoint(p.path, p.claims); err != nil {
		return nil, err
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		if d.MIG == nil || d.MIG.Created {
			continue
		}
		dev, _ := p.layout.Device(d.Device)
		if err := p.createMIG(dev, d.MIG); err != nil {
			return nil, fmt.Errorf("claim %s: device %s: %w", claimRef(c), d.Device, err)
		}
		p.claims[uid] = c
		if err := saveCheckpoint(p.path, p.claims); err != nil {
			return nil, err
		}
	}
	if err := p.writeSpec(c); err != nil {
		return nil, err
	}
	c.Prepared = true
	p.claims[uid] = c
	if err := saveCheckpoint(p.path, p.claims); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Prepared claim", "claim", claimRef(c), "devices", len(c.Devices))
	return p.result(c), nil
}

// plan checks the claim's devices against this node and the claims
// already prepared, and lists what to prepare.
func (p *Preparer) plan(claim *resourceapi.ResourceClaim) (Claim, error) {
	c := Claim{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	if claim.Status.Allocation == nil {
		return c, fmt.Errorf("claim %s: status.allocation is empty: not allocated", claimRef(c))
	}
	for i, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != p.layout.Driver {
			continue
		}
		if r.Pool != p.layout.Pool() {
			return c, fmt.Errorf("claim %s: status.allocation.devices.results[%d]: pool %q is not this node's pool %q", claimRef(c), i, r.Pool, p.layout.Pool())
		}
		dev, ok := p.layout.Device(r.Device)
		if !ok {
			return c, fmt.Errorf("claim %s: status.allocation.devices.results[%d]: device %q is not published by this node", claimRef(c), i, r.Device)
		}
		d := Device{Requests: []string{r.Request}, Pool: r.Pool, Device: r.Device, CDIDeviceIDs: []string{p.cdiName(c.UID, r.Device)}}
		if r.ShareID != nil {
			d.ShareID = string(*r.ShareID)
			d.Share = shareOf(r)
		}
		if dev.MIG != nil {
			d.MIG = &MIGInstance{ParentUUID: dev.GPU.UUID, ProfileID: dev.MIG.ID, CIProfile: dev.MIG.CIProfileID, Start: dev.Placement.Start}
		}
		if other, od, ok := p.conflict(c.UID, dev, d); ok {
			return c, fmt.Errorf("%w: device %s of claim %s is already prepared for claim %s (as %s)", ErrConflict, r.Device, claimRef(c), claimRef(other), od)
		}
		c.Devices = append(c.Devices, d)
	}
	return c, nil
}

func shareOf(r resourceapi.DeviceRequestAllocationResult) *Share {
	s := &Share{}
	if q, ok := r.ConsumedCapacity["memory"]; ok {
		s.MemoryMiB = q.Value() / (1024 * 1024)
	}
	if q, ok := r.ConsumedCapacity["compute"]; ok {
		s.ComputePercent = q.Value()
	}
	return s
}

// conflict finds a claim other than uid holding the device or hardware
// it overlaps: the same device (unless both are shares of a shareable
// GPU), the whole GPU of a MIG partition, or an overlapping partition.
func (p *Preparer) conflict(uid string, dev resources.Device, d Device) (Claim, string, bool) {
	for _, other := range p.claims {
		if other.UID == uid {
			continue
		}
		for _, od := range other.Devices {
			o, ok := p.layout.Device(od.Device)
			if !ok || o.GPU.UUID != dev.GPU.UUID {
				continue
			}
			if o.Name == dev.Name && d.ShareID != "" && od.ShareID != "" {
				continue
			}
			if o.Name == dev.Name || o.MIG == nil || dev.MIG == nil || overlap(o, dev) {
				return other, od.Device, true
			}
		}
	}
	return Claim{}, "", false
}

func overlap(a, b resources.Device) bool {
	return a.Placement.Start < b.Placement.Start+b.Placement.Size && b.Placement.Start < a.Placement.Start+a.Placement.Size
}

// resume keeps what an interrupted prepare of the same claim recorded
// about MIG instances it had begun to create.
func resume(c, old Claim) Claim {
	for i := range c.Devices {
		for _, od := range old.Devices {
			if od.Device == c.Devices[i].Device && od.MIG != nil {
				m := *od.MIG
				c.Devices[i].MIG = &m
			}
		}
	}
	return c
}

func (p *Preparer) result(c Claim) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		kd := kubeletplugin.Device{Requests: d.Requests, PoolName: d.Pool, DeviceName: d.Device, CDIDeviceIDs: d.CDIDeviceIDs}
		if d.ShareID != "" {
			id := types.UID(d.ShareID)
			kd.ShareID = &id
		}
		out = append(out, kd)
	}
	return out
}

// Unprepare undoes Prepare; unpreparing an unknown claim is no error.
func (p *Preparer) Unprepare(ctx context.Context, uid types.UID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.claims[string(uid)]
	if !ok {
		return nil
	}
	for i := range c.Devices {
		if m := c.Devices[i].MIG; m != nil {
			if err := p.destroyMIG(m); err != nil {
				return fmt.Errorf("claim %s: device %s: %w", claimRef(c), c.Devices[i].Device, err)
			}
		}
	}
	if err := p.removeSpec(c.UID); err != nil {
		return err
	}
	delete(p.claims, c.UID)
	if err := saveCheckpoint(p.path, p.claims); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", claimRef(c))
	return nil
}

func claimRef(c Claim) string {
	return fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, c.UID)
}
