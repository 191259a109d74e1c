package mocknvml

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
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
// while MIG is off and GPU instances that overlap existing ones.
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
	create := dev.CreateGpuInstanceWithPlacementFunc
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		dev.RLock()
		mode := dev.MigMode
		var taken []nvml.GpuInstancePlacement
		for gi := range dev.GpuInstances {
			taken = append(taken, gi.Info.Placement)
		}
		dev.RUnlock()
		if mode != nvml.DEVICE_MIG_ENABLE {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		valid := false
		for _, p := range RealPlacements[int(info.Id)] {
			valid = valid || p == *placement
		}
		if !valid {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		for _, t := range taken {
			if placement.Start < t.Start+t.Size && t.Start < placement.Start+placement.Size {
				return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
			}
		}
		return create(info, placement)
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

// GPUInstances counts the MIG GPU instances on GPU index.
func (s *Server) GPUInstances(index int) int {
	dev := s.Devices[index].(*server.Device)
	dev.RLock()
	defer dev.RUnlock()
	return len(dev.GpuInstances)
}
