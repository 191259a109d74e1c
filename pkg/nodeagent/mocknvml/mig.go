package mocknvml

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// RealPlacements are the GPU instance placements of GPUs with 7 compute
// and 8 memory slices (A100, H100, H200, B200, GB200), by GPU instance
// profile: start and size in memory slices. go-nvml's mocks list other
// placements for the Hopper and Blackwell GPUs.
var RealPlacements = map[int][]nvml.GpuInstancePlacement{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      span(1, 0, 1, 2, 3, 4, 5, 6),
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: span(1, 0, 1, 2, 3, 4, 5, 6),
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: span(2, 0, 2, 4, 6),
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      span(2, 0, 2, 4),
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1: span(2, 0, 2, 4),
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      span(4, 0, 4),
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      span(4, 0),
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      span(8, 0),
}

func span(size uint32, starts ...uint32) []nvml.GpuInstancePlacement {
	p := make([]nvml.GpuInstancePlacement, len(starts))
	for i, s := range starts {
		p[i] = nvml.GpuInstancePlacement{Start: s, Size: size}
	}
	return p
}

// realMIGPlacements makes a mock GPU with the 7-slice geometry answer with
// the real placements and refuse, as the hardware does, GPU instances
// while MIG is off and GPU instances that overlap existing ones. Like
// NVML, it reuses the IDs of destroyed instances, and it lists a MIG
// device, with a UUID of its own, per compute instance.
func realMIGPlacements(dev *server.Device) {
	profiles := dev.Config.MIGProfiles.GpuInstanceProfiles
	if _, ok := profiles[nvml.GPU_INSTANCE_PROFILE_7_SLICE]; !ok {
		return
	}
	dev.GetGpuInstancePossiblePlacementsFunc = func(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
		if _, ok := profiles[int(info.Id)]; !ok {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		return RealPlacements[int(info.Id)], nvml.SUCCESS
	}
	migDeviceHandles(dev)
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		return createGI(dev, info, placement)
	}
	dev.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		dev.RLock()
		defer dev.RUnlock()
		for gi := range dev.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

// createGI creates a GPU instance at a real, free placement, with the
// lowest ID not in use.
func createGI(dev *server.Device, info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	dev.Lock()
	defer dev.Unlock()
	if dev.MigMode != nvml.DEVICE_MIG_ENABLE {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	if !slices.Contains(RealPlacements[int(info.Id)], *placement) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	used := map[uint32]bool{}
	for gi := range dev.GpuInstances {
		t := gi.Info.Placement
		if placement.Start < t.Start+t.Size && t.Start < placement.Start+placement.Size {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		used[gi.Info.Id] = true
	}
	gi := server.NewGpuInstanceFromInfo(nvml.GpuInstanceInfo{Device: dev, Id: lowestFree(used), ProfileId: info.Id, Placement: *placement}, dev.Config.MIGProfiles)
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		return createCI(gi, info)
	}
	dev.GpuInstances[gi] = struct{}{}
	return gi, nvml.SUCCESS
}

// createCI creates a compute instance with the lowest ID not in use in
// its GPU instance.
func createCI(gi *server.GpuInstance, info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	gi.Lock()
	defer gi.Unlock()
	used := map[uint32]bool{}
	for ci := range gi.ComputeInstances {
		used[ci.Info.Id] = true
	}
	ci := server.NewComputeInstanceFromInfo(nvml.ComputeInstanceInfo{Device: gi.Info.Device, GpuInstance: gi, Id: lowestFree(used), ProfileId: info.Id})
	gi.ComputeInstances[ci] = struct{}{}
	return ci, nvml.SUCCESS
}

func lowestFree(used map[uint32]bool) uint32 {
	id := uint32(0)
	for used[id] {
		id++
	}
	return id
}

// GPUInstances counts the MIG GPU instances on GPU index.
func (s *Server) GPUInstances(index int) int {
	dev := s.Devices[index].(*server.Device)
	dev.RLock()
	defer dev.RUnlock()
	return len(dev.GpuInstances)
}

// migUUIDs are the UUIDs NVML gave the MIG devices of compute instances
// (a new one each time an instance is made, as on real GPUs).
var (
	migUUIDs  sync.Map // *server.ComputeInstance -> string
	migSerial atomic.Uint64
)

// maxMIGDevices is GetMaxMigDeviceCount of a GPU with 7 compute slices.
const maxMIGDevices = 7

// migDeviceHandles makes the GPU answer for its MIG devices, one per
// compute instance, by index as NVML does: in order of GPU instance and
// compute instance IDs, ERROR_NOT_FOUND past the last.
func migDeviceHandles(dev *server.Device) {
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return maxMIGDevices, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(index int) (nvml.Device, nvml.Return) {
		if index < 0 || index >= maxMIGDevices {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		devices := migDevices(dev)
		if index >= len(devices) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return devices[index], nvml.SUCCESS
	}
}

func migDevices(dev *server.Device) []nvml.Device {
	dev.RLock()
	gis := slices.SortedFunc(maps.Keys(dev.GpuInstances), func(a, b *server.GpuInstance) int { return cmp.Compare(a.Info.Id, b.Info.Id) })
	dev.RUnlock()
	var out []nvml.Device
	for _, gi := range gis {
		gi.RLock()
		cis := slices.SortedFunc(maps.Keys(gi.ComputeInstances), func(a, b *server.ComputeInstance) int { return cmp.Compare(a.Info.Id, b.Info.Id) })
		gi.RUnlock()
		for _, ci := range cis {
			out = append(out, migDevice(dev, gi.Info.Id, ci))
		}
	}
	return out
}

// migDevice is the MIG device handle of compute instance ci in GPU
// instance gi of dev.
func migDevice(dev *server.Device, gi uint32, ci *server.ComputeInstance) nvml.Device {
	uuid, _ := migUUIDs.LoadOrStore(ci, "MIG-"+formatUUID(seededUUID(fmt.Sprintf("%s/%d/%d/%d", dev.UUID, gi, ci.Info.Id, migSerial.Add(1)))))
	return &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return uuid.(string), nvml.SUCCESS },
		IsMigDeviceHandleFunc:    func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return int(gi), nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) {
			return dev, nvml.SUCCESS
		},
	}
}
