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
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/boot"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// Options of a Preparer.
type Options struct {
	// CheckpointPath is the checkpoint file.
	CheckpointPath string
	// CDIDir is where CDI specs go (the runtime reads /var/run/cdi).
	CDIDir string
	// BootIDPath tells one boot of the node from the next; default
	// boot.IDPath.
	BootIDPath string
}

// Preparer prepares and unprepares claims on one node.
type Preparer struct {
	mu     sync.Mutex
	lib    nvml.Interface
	layout *resources.Layout
	cdi    *cdi.Cache
	path   string
	boot   string // this boot's ID, recorded with the checkpoint
	claims map[string]Claim
}

// ErrConflict means a device is already prepared for another claim.
var ErrConflict = errors.New("device already prepared for another claim")

// New loads the checkpoint and initializes NVML (for MIG instances).
func New(lib nvml.Interface, layout *resources.Layout, o Options) (*Preparer, error) {
	if o.CheckpointPath == "" || o.CDIDir == "" {
		return nil, errors.New("prepare: checkpoint path and CDI directory are required")
	}
	if o.BootIDPath == "" {
		o.BootIDPath = boot.IDPath
	}
	claims, savedBoot, err := loadCheckpoint(o.CheckpointPath)
	if err != nil {
		return nil, err
	}
	bootID := boot.ID(o.BootIDPath)
	if boot.Changed(savedBoot, bootID) && forgetBeforeReboot(claims) {
		if err := saveCheckpoint(o.CheckpointPath, bootID, claims); err != nil {
			return nil, err
		}
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(o.CDIDir), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI directory %s: %w", o.CDIDir, err)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML init: %s", nvml.ErrorString(ret))
	}
	return &Preparer{lib: lib, layout: layout, cdi: cache, path: o.CheckpointPath, boot: bootID, claims: claims}, nil
}

// Close releases NVML once no prepare or unprepare is under way: the
// kubelet plugin's gRPC server stops without waiting for its handlers.
func (p *Preparer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lib.Shutdown()
}

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

// Prepare prepares a claim; preparing it again returns the same devices
// while its allocation names them.
//
// The kubelet prepares its claims again after it restarts or the node
// reboots. The checkpoint survives a reboot; the CDI spec (under
// /var/run, a tmpfs) and MIG instances (gone with any GPU reset) do not.
// So a repeated prepare writes the spec again and recreates the
// instances that are gone.
func (p *Preparer) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid := string(claim.UID)
	if err := p.undoReallocated(ctx, claim); err != nil {
		return nil, err
	}
	// Instances gone since they were recorded (a reboot), whether the
	// prepare finished or was interrupted by a crash, are made again.
	if c, ok := p.claims[uid]; ok {
		gone := p.forgetGoneInstances(ctx, c)
		if c.Prepared && !gone {
			if err := p.writeSpec(c); err != nil {
				return nil, err
			}
			return p.result(c), nil
		}
		if gone {
			c.Prepared = false
			if err := p.save(c); err != nil {
				return nil, err
			}
		}
	}
	c, err := p.plan(claim)
	if err != nil {
		return nil, err
	}
	if len(c.Devices) == 0 {
		// None of this driver's (the kubelet asks the drivers it recorded
		// for the claim, and it was allocated anew elsewhere): nothing to
		// prepare, and a spec of no devices is invalid.
		klog.FromContext(ctx).V(2).Info("Claim has no devices of this driver", "claim", claimRef(c))
		return nil, nil
	}
	if old, ok := p.claims[uid]; ok {
		c = resume(c, old) // a prepare interrupted by a crash
	}
	if err := p.save(c); err != nil {
		return nil, err
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		if d.MIG == nil || d.MIG.Created {
			continue
		}
		dev, _ := p.layout.Device(d.Device)
		if err := p.createMIG(dev, d.MIG, func() error { return p.save(c) }); err != nil {
			return nil, fmt.Errorf("claim %s: device %s: %w", claimRef(c), d.Device, err)
		}
		if err := p.save(c); err != nil {
			return nil, err
		}
	}
	if err := p.writeSpec(c); err != nil {
		return nil, err
	}
	c.Prepared = true
	if err := p.save(c); err != nil {
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
		d, err := p.planDevice(c, i, r)
		if err != nil {
			return c, err
		}
		c.Devices = append(c.Devices, d)
	}
	if err := p.checkConfig(c, claim.Status.Allocation.Devices.Config); err != nil {
		return c, err
	}
	if err := p.checkShares(c); err != nil {
		return c, err
	}
	p.assignCDIDevices(&c, claim)
	return c, nil
}

// checkConfig refuses opaque parameters for this driver that apply to
// the claim's devices here (a claim written for NVIDIA's driver, asking
// for MPS or time-slicing, say): the agent takes none, and preparing
// without them would give the pod other sharing than it asked for.
func (p *Preparer) checkConfig(c Claim, configs []resourceapi.DeviceAllocationConfiguration) error {
	for i, cfg := range configs {
		if cfg.Opaque == nil || cfg.Opaque.Driver != p.layout.Driver || !configApplies(cfg.Requests, c.Devices) {
			continue
		}
		return fmt.Errorf("claim %s: status.allocation.devices.config[%d]: opaque parameters for driver %s, %s, for %s: this node agent takes none; remove them from %s", claimRef(c), i, cfg.Opaque.Driver, configSource(cfg.Source), configRequests(cfg.Requests), configHolder(cfg.Source))
	}
	return nil
}

// configSource, configRequests and configHolder word where a config came
// from and what it applies to, so that the user finds the object to edit
// (the index is the allocation's, not the claim's or the class's).
func configSource(s resourceapi.AllocationConfigSource) string {
	if s == resourceapi.AllocationConfigSourceClass {
		return "from the device class (spec.config)"
	}
	return "from the claim (spec.devices.config)"
}

func configRequests(requests []string) string {
	if len(requests) == 0 {
		return "every request"
	}
	return "request " + strings.Join(requests, ", ")
}

func configHolder(s resourceapi.AllocationConfigSource) string {
	if s == resourceapi.AllocationConfigSourceClass {
		return "the DeviceClass its request names, or use another class"
	}
	return "the claim (or its ResourceClaimTemplate)"
}

// configApplies: a configuration naming no requests applies to all; one
// naming a request applies to its subrequests too ("gpus" to "gpus/a").
func configApplies(requests []string, devices []Device) bool {
	if len(requests) == 0 {
		return len(devices) > 0
	}
	for _, d := range devices {
		for _, dr := range d.Requests {
			for _, r := range requests {
				if dr == r || strings.HasPrefix(dr, r+"/") {
					return true
				}
			}
		}
	}
	return false
}

// planDevice checks result i of claim c and says how to prepare it.
//
// A result with admin access gets the device without owning it, as the
// scheduler's allocator treats it (admin-access results do not count as
// allocated, nor consume counters): it conflicts with no claim, no claim
// conflicts with it, and on a MIG partition it creates no instance. The
// scheduler may give that placement to a workload at any time (whose
// prepare would adopt an instance found there, and the admin claim's
// unprepare would destroy it under the workload), and the placement may
// overlap instances that exist. So the admin claim gets the parent GPU
// instead: monitoring and debugging tools see whatever instances exist
// on it, now and later, and its unprepare tears nothing down.
func (p *Preparer) planDevice(c Claim, i int, r resourceapi.DeviceRequestAllocationResult) (Device, error) {
	if r.Pool != p.layout.Pool() {
		return Device{}, fmt.Errorf("claim %s: status.allocation.devices.results[%d]: pool %q is not this node's pool %q", claimRef(c), i, r.Pool, p.layout.Pool())
	}
	dev, ok := p.layout.Device(r.Device)
	if !ok {
		return Device{}, fmt.Errorf("claim %s: status.allocation.devices.results[%d]: device %q is not published by this node", claimRef(c), i, r.Device)
	}
	d := Device{Requests: []string{r.Request}, Pool: r.Pool, Device: r.Device, AdminAccess: ptr.Deref(r.AdminAccess, false)}
	if r.ShareID != nil {
		d.ShareID = string(*r.ShareID)
		d.Share = shareOf(r)
	}
	if d.AdminAccess {
		return d, nil
	}
	switch {
	case dev.MIG != nil:
		d.MIG = &MIGInstance{ParentUUID: dev.GPU.UUID, ProfileID: dev.MIG.ID, CIProfile: dev.MIG.CIProfileID, Start: dev.Placement.Start}
	case dev.Mode == config.MIG:
		// CUDA sees no device on a GPU in MIG mode without instances: the
		// whole GPU's claim gets the instance that spans it (its counters
		// keep every partition of the GPU unallocated meanwhile).
		prof, pl, ok := dev.GPU.FullInstance()
		if !ok {
			return Device{}, fmt.Errorf("claim %s: status.allocation.devices.results[%d]: device %q: GPU %d is in MIG mode and offers no GPU instance to span it", claimRef(c), i, r.Device, dev.GPU.Index)
		}
		d.MIG = &MIGInstance{ParentUUID: dev.GPU.UUID, ProfileID: prof.ID, CIProfile: prof.CIProfileID, Start: pl.Start}
	}
	if other, od, ok := p.conflict(c.UID, dev, d); ok {
		return Device{}, fmt.Errorf("%w: device %s of claim %s is already prepared for claim %s (as %s)", ErrConflict, r.Device, claimRef(c), claimRef(other), od)
	}
	return d, nil
}

func shareOf(r resourceapi.DeviceRequestAllocationResult) *Share {
	s := &Share{}
	if q, ok := r.ConsumedCapacity[contract.CapacityMemory]; ok {
		s.MemoryMiB = q.Value() / contract.ShareMemoryUnit
	}
	if q, ok := r.ConsumedCapacity[contract.CapacityCompute]; ok {
		s.ComputePercent = q.Value()
	}
	return s
}

// conflict finds a claim other than uid holding the device or hardware
// it overlaps: the same device (unless both are shares of a shareable
// GPU), the whole GPU of a MIG partition, or an overlapping partition.
// Devices held with admin access hold nothing.
func (p *Preparer) conflict(uid string, dev resources.Device, d Device) (Claim, string, bool) {
	for _, other := range p.claims {
		if other.UID == uid {
			continue
		}
		for _, od := range other.Devices {
			o, ok := p.layout.Device(od.Device)
			if !ok || o.GPU.UUID != dev.GPU.UUID || od.AdminAccess {
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
// about MIG instances it had begun to create. A record of an instance not
// known to exist (forgotten after a reboot, or being created) is kept only
// while it names the instance the plan wants: device names follow NVML's
// enumeration index, so after a reboot without one GPU the same name can
// be another GPU, and the instance belongs on the GPU the scheduler
// counted; nothing survives the reboot on the old one to adopt.
func resume(c, old Claim) Claim {
	for i := range c.Devices {
		for _, od := range old.Devices {
			if od.Device != c.Devices[i].Device || od.MIG == nil {
				continue
			}
			if plan := c.Devices[i].MIG; !od.MIG.Created && (plan == nil || !plan.samePlacement(*od.MIG)) {
				continue
			}
			m := *od.MIG
			c.Devices[i].MIG = &m
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
// The checkpoint follows every step: the claim is first marked not
// prepared, then each destroyed MIG instance is forgotten, so that after
// a crash the next unprepare destroys only what is left (NVML reuses
// instance IDs) and a next prepare recreates what is gone.
func (p *Preparer) Unprepare(ctx context.Context, uid types.UID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.claims[string(uid)]
	if !ok {
		// Its spec is named by the UID alone: one left by a checkpoint
		// removed to recover from corruption goes now.
		return p.removeSpec(string(uid))
	}
	return p.unprepare(ctx, c)
}

// unprepare undoes the preparation of c, which the checkpoint holds.
func (p *Preparer) unprepare(ctx context.Context, c Claim) error {
	c.Prepared = false
	if err := p.save(c); err != nil {
		return err
	}
	for i := range c.Devices {
		m := c.Devices[i].MIG
		if m == nil {
			continue
		}
		if err := p.destroyMIG(ctx, m); err != nil {
			return fmt.Errorf("claim %s: device %s: %w", claimRef(c), c.Devices[i].Device, err)
		}
		c.Devices[i].MIG = nil
		if err := p.save(c); err != nil {
			return err
		}
	}
	if err := p.removeSpec(c.UID); err != nil {
		return err
	}
	delete(p.claims, c.UID)
	if err := saveCheckpoint(p.path, p.boot, p.claims); err != nil {
		// Still on disk: the kubelet's retry must find it and write its
		// removal again, not report success with the claim (and its
		// devices) back after a restart.
		p.claims[c.UID] = c
		return err
	}
	klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", claimRef(c))
	return nil
}

// Unowned lists the GPU instances of GPU uuid with list, and returns
// those that no claim in the checkpoint holds or was creating. It lists
// them while no claim is being prepared or unprepared, so that an
// instance being made or destroyed for a claim is never taken for
// another's.
func (p *Preparer) Unowned(uuid string, list func() ([]discovery.MIGInstance, error)) ([]discovery.MIGInstance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	instances, err := list()
	if err != nil {
		return nil, err
	}
	var out []discovery.MIGInstance
	for _, inst := range instances {
		if !p.owns(uuid, inst.Profile, inst.Start) {
			out = append(out, inst)
		}
	}
	return out, nil
}

// owns tells whether a claim in the checkpoint holds, or was creating,
// a GPU instance of the profile (NVML's profile index, as
// GetGpuInstanceProfileInfo takes it) at slice start of GPU uuid.
func (p *Preparer) owns(uuid string, profile, start int) bool {
	for _, c := range p.claims {
		for _, d := range c.Devices {
			if m := d.MIG; m != nil && m.ParentUUID == uuid && m.ProfileID == profile && m.Start == start && (m.Created || m.Creating) {
				return true
			}
		}
	}
	return false
}

// save records the claim's state in the checkpoint. A claim whose first
// write fails is forgotten: no restart would know it, so it must not
// hold devices in memory either. A recorded claim keeps its new state in
// memory when the write fails (its records share MIG instances with the
// copy being changed, so the old state cannot be put back): every step
// that calls save is redone by the retry.
func (p *Preparer) save(c Claim) error {
	_, had := p.claims[c.UID]
	p.claims[c.UID] = c
	if err := saveCheckpoint(p.path, p.boot, p.claims); err != nil {
		if !had {
			delete(p.claims, c.UID)
		}
		return err
	}
	return nil
}

func claimRef(c Claim) string {
	return fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, c.UID)
}
