package prepare

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// createMIG creates the GPU instance at the placement and a compute
// instance spanning it, recording their IDs in m. Before asking NVML it
// sets m.Creating and records it (record saves the checkpoint). An
// instance found at the placement while m.Creating is set is the one an
// interrupted prepare made, and is taken instead of created twice;
// otherwise it was made by someone else, and the placement is refused
// rather than shared with its workload.
func (p *Preparer) createMIG(dev resources.Device, m *MIGInstance, record func() error) error {
	prof, at, err := instanceShape(dev, m)
	if err != nil {
		return err
	}
	gpu, ret := p.lib.DeviceGetHandleByUUID(m.ParentUUID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: %s", m.ParentUUID, nvml.ErrorString(ret))
	}
	info, ret := gpu.GetGpuInstanceProfileInfo(m.ProfileID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("MIG profile %s: %s", prof.Name, nvml.ErrorString(ret))
	}
	gi, err := existingGI(gpu, &info, m.Start)
	if err != nil {
		return err
	}
	if gi != nil && !m.Creating {
		giInfo, _ := gi.GetInfo()
		return fmt.Errorf("MIG placement %s at slice %d of GPU %s is held by GPU instance %d, which the agent did not create", prof.Name, m.Start, m.ParentUUID, giInfo.Id)
	}
	if gi == nil {
		m.Creating = true
		if err := record(); err != nil {
			return err
		}
		placement := nvml.GpuInstancePlacement{Start: uint32(m.Start), Size: uint32(at.Size)}
		var ret nvml.Return
		gi, ret = gpu.CreateGpuInstanceWithPlacement(&info, &placement)
		if ret != nvml.SUCCESS {
			// NVML created nothing: an instance found there later is
			// not this one.
			m.Creating = false
			if err := record(); err != nil {
				return err
			}
			return fmt.Errorf("create GPU instance %s at slice %d: %s", prof.Name, m.Start, nvml.ErrorString(ret))
		}
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU instance info: %s", nvml.ErrorString(ret))
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(m.CIProfile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("compute instance profile %d: %s", m.CIProfile, nvml.ErrorString(ret))
	}
	cis, ret := gi.GetComputeInstances(&ciInfo)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("compute instances: %s", nvml.ErrorString(ret))
	}
	var ci nvml.ComputeInstance
	if len(cis) > 0 {
		ci = cis[0]
	} else if ci, ret = gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		return fmt.Errorf("create compute instance: %s", nvml.ErrorString(ret))
	}
	cInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("compute instance info: %s", nvml.ErrorString(ret))
	}
	uuid, err := migUUID(gpu, giInfo.Id, cInfo.Id)
	if err != nil {
		return err
	}
	m.GI, m.CI, m.Created, m.Creating, m.Identity, m.UUID = giInfo.Id, cInfo.Id, true, false, identityOf(giInfo), uuid
	return nil
}

// migUUID is the UUID of the MIG device of GPU instance gi and compute
// instance ci on gpu. NVML numbers MIG devices by index, some of which
// hold none (ERROR_NOT_FOUND).
func migUUID(gpu nvml.Device, gi, ci uint32) (string, error) {
	n, ret := gpu.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("MIG devices: %s", nvml.ErrorString(ret))
	}
	for i := range n {
		mig, ret := gpu.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device at this index, as NVIDIA's go-nvlib reads it
		}
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("MIG device %d: %s", i, nvml.ErrorString(ret))
		}
		g, gRet := mig.GetGpuInstanceId()
		c, cRet := mig.GetComputeInstanceId()
		if gRet != nvml.SUCCESS || cRet != nvml.SUCCESS || uint32(g) != gi || uint32(c) != ci {
			continue
		}
		uuid, ret := mig.GetUUID()
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("UUID of MIG device %d: %s", i, nvml.ErrorString(ret))
		}
		return uuid, nil
	}
	return "", fmt.Errorf("no MIG device for GPU instance %d, compute instance %d", gi, ci)
}

// migDeviceUUID is the recorded MIG device's UUID, looked up for an
// instance recorded by an agent that did not keep it.
func (p *Preparer) migDeviceUUID(m *MIGInstance) (string, error) {
	if m.UUID != "" {
		return m.UUID, nil
	}
	gpu, ret := p.lib.DeviceGetHandleByUUID(m.ParentUUID)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("GPU %s: %s", m.ParentUUID, nvml.ErrorString(ret))
	}
	return migUUID(gpu, m.GI, m.CI)
}

// instanceShape is the profile and placement of m's instance: the
// partition's own, or, for the whole of a MIG GPU, the recorded profile
// at the recorded slice.
func instanceShape(dev resources.Device, m *MIGInstance) (*discovery.MIGProfile, discovery.Placement, error) {
	if dev.MIG != nil {
		return dev.MIG, dev.Placement, nil
	}
	for i := range dev.GPU.MIGProfiles {
		prof := &dev.GPU.MIGProfiles[i]
		if prof.ID != m.ProfileID {
			continue
		}
		for _, pl := range prof.Placements {
			if pl.Start == m.Start {
				return prof, pl, nil
			}
		}
	}
	return nil, discovery.Placement{}, fmt.Errorf("GPU %s offers no MIG profile %d at slice %d", m.ParentUUID, m.ProfileID, m.Start)
}

func existingGI(gpu nvml.Device, info *nvml.GpuInstanceProfileInfo, start int) (nvml.GpuInstance, error) {
	gis, ret := gpu.GetGpuInstances(info)
	if instancesGone(ret) {
		return nil, nil
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU instances: %s", nvml.ErrorString(ret))
	}
	for _, gi := range gis {
		i, ret := gi.GetInfo()
		if ret == nvml.SUCCESS && int(i.Placement.Start) == start {
			return gi, nil
		}
	}
	return nil, nil
}

// forgetGoneInstances marks the claim's MIG instances that no longer exist
// as not created, so that Prepare creates them again, and says whether
// there was one. A GPU that cannot be read is left for the prepare to
// report, unless the device's name now belongs to another GPU: names
// follow NVML's enumeration index, so after a reboot without one GPU the
// recorded GPU may be gone from the node, and its instances with it.
func (p *Preparer) forgetGoneInstances(ctx context.Context, c Claim) bool {
	gone := false
	for _, d := range c.Devices {
		m := d.MIG
		if m == nil || !m.Created {
			continue
		}
		if !p.instanceGone(ctx, d.Device, m) {
			continue
		}
		klog.FromContext(ctx).Info("MIG instance of a claim is gone (reboot or GPU reset): creating it again", "claim", claimRef(c), "device", d.Device, "gi", m.GI)
		m.GI, m.CI, m.Created, m.Creating, m.Identity, m.UUID = 0, 0, false, false, nil, ""
		gone = true
	}
	return gone
}

// instanceGone reports whether the created instance m of device is known
// to be gone: not found on its GPU, or its GPU not found while the
// device's name belongs to another GPU.
func (p *Preparer) instanceGone(ctx context.Context, device string, m *MIGInstance) bool {
	gpu, ret := p.lib.DeviceGetHandleByUUID(m.ParentUUID)
	if ret != nvml.SUCCESS {
		dev, known := p.layout.Device(device)
		return known && dev.GPU.UUID != m.ParentUUID
	}
	gi, err := recordedGI(ctx, gpu, m)
	return err == nil && gi == nil
}

// instancesGone: NVML answers so when the GPU's MIG instances no longer
// exist: the instance is not there, the GPU fell off the bus (its reset
// destroys every instance), or MIG mode is off. Unprepare must not fail
// on them, or the kubelet retries it forever and the pod never finishes
// terminating.
func instancesGone(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_NOT_SUPPORTED
}

// destroyMIG destroys the compute and GPU instance; instances already
// gone (a repeated unprepare, a GPU reset, a lost GPU, MIG turned off)
// are no error.
func (p *Preparer) destroyMIG(ctx context.Context, m *MIGInstance) error {
	gpu, ret := p.lib.DeviceGetHandleByUUID(m.ParentUUID)
	if instancesGone(ret) {
		klog.FromContext(ctx).Info("GPU of a MIG instance is gone: nothing to destroy", "gpu", m.ParentUUID, "gi", m.GI, "nvml", nvml.ErrorString(ret))
		return nil
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: %s", m.ParentUUID, nvml.ErrorString(ret))
	}
	gi, err := recordedGI(ctx, gpu, m)
	if err != nil || gi == nil {
		return err
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(m.CIProfile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret == nvml.SUCCESS {
		cis, _ := gi.GetComputeInstances(&ciInfo)
		for _, ci := range cis {
			if ret := ci.Destroy(); ret != nvml.SUCCESS && !instancesGone(ret) {
				return fmt.Errorf("destroy compute instance: %s", nvml.ErrorString(ret))
			}
		}
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS && !instancesGone(ret) {
		return fmt.Errorf("destroy GPU instance %d: %s", m.GI, nvml.ErrorString(ret))
	}
	return nil
}

// recordedGI finds the GPU instance m records, or nil when it is gone.
// NVML reuses instance IDs, so the instance with the recorded ID is m's
// only if profile and placement match what was recorded at create time;
// another one there means m's instance was destroyed (outside the agent,
// by a GPU reset) and its ID went to an instance someone else uses.
func recordedGI(ctx context.Context, gpu nvml.Device, m *MIGInstance) (nvml.GpuInstance, error) {
	if !m.Created && !m.Creating {
		return nil, nil // never asked for: an instance there is someone else's
	}
	if !m.Created || m.Identity == nil {
		// Creation interrupted (or no identity recorded): the instance
		// of the recorded profile at the recorded placement.
		info, ret := gpu.GetGpuInstanceProfileInfo(m.ProfileID)
		if instancesGone(ret) {
			return nil, nil
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG profile %d: %s", m.ProfileID, nvml.ErrorString(ret))
		}
		return existingGI(gpu, &info, m.Start)
	}
	gi, ret := gpu.GetGpuInstanceById(int(m.GI))
	if instancesGone(ret) {
		return nil, nil
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU instance %d: %s", m.GI, nvml.ErrorString(ret))
	}
	info, ret := gi.GetInfo()
	if instancesGone(ret) {
		return nil, nil
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU instance %d info: %s", m.GI, nvml.ErrorString(ret))
	}
	if !m.Identity.is(info) {
		klog.FromContext(ctx).Info("Recorded GPU instance is gone, its ID now names another: leaving that one alone",
			"gpu", m.ParentUUID, "gi", m.GI, "recorded", *m.Identity, "found", *identityOf(info))
		return nil, nil
	}
	return gi, nil
}
