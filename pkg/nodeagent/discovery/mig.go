package discovery

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIGProfile is one GPU instance profile of a MIG-enabled GPU.
type MIGProfile struct {
	// ID is NVML's GPU instance profile ID; CIProfileID the compute
	// instance profile that spans the whole GPU instance.
	ID          int
	CIProfileID int
	// Name as nvidia-smi and NVIDIA's DRA driver print it: "1g.10gb".
	Name string
	// ComputeSlices of the GPU's 7 (SliceCount); Multiprocessors SMs.
	ComputeSlices   int
	Multiprocessors int
	MemoryMiB       int64
	// Placements in memory slices, as NVML lists them.
	Placements []Placement
}

// FullInstance is the GPU instance profile and placement that span the
// whole GPU (7g.80gb at slice 0 on an H100): the most memory slices, then
// the most compute, then the lowest profile ID. False when MIG is off.
func (g GPU) FullInstance() (*MIGProfile, Placement, bool) {
	var best *MIGProfile
	var at Placement
	for i := range g.MIGProfiles {
		p := &g.MIGProfiles[i]
		for _, pl := range p.Placements {
			if best == nil || pl.Size > at.Size || pl.Size == at.Size && p.ComputeSlices > best.ComputeSlices {
				best, at = p, pl
			}
		}
	}
	return best, at, best != nil
}

// Placement is where a GPU instance can start and how many memory slices
// it spans.
type Placement struct {
	Start, Size int
}

// Overlaps tells whether two placements share a memory slice.
func (p Placement) Overlaps(o Placement) bool {
	return p.Start < o.Start+o.Size && o.Start < p.Start+p.Size
}

// MIGInstance is a GPU instance that exists: NVML's ID, its profile (the
// index GetGpuInstanceProfileInfo takes, as MIGProfile.ID) and where it
// sits.
type MIGInstance struct {
	ID, Profile int
	Placement
}

// publishedProfiles are the GPU instance profiles the agent publishes:
// the plain ones and the double-memory 1g. Media-extension variants
// (+me) are left out: they compete for the GPU's single set of media
// engines, which the slice model does not count.
var publishedProfiles = []int{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE,
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2,
	nvml.GPU_INSTANCE_PROFILE_2_SLICE,
	nvml.GPU_INSTANCE_PROFILE_3_SLICE,
	nvml.GPU_INSTANCE_PROFILE_4_SLICE,
	nvml.GPU_INSTANCE_PROFILE_6_SLICE,
	nvml.GPU_INSTANCE_PROFILE_7_SLICE,
	nvml.GPU_INSTANCE_PROFILE_8_SLICE,
}

// computeProfileFor maps a GPU instance's slice count to the compute
// instance profile that takes all of it.
var computeProfileFor = map[int]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE,
	7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// ErrMIGRefused says that NVML refuses this process a MIG-enabled GPU's placements
// (privileged queries: SYS_ADMIN, which the agent has only where its
// configuration puts a GPU in MIG mode).
var ErrMIGRefused = errors.New("NVML refuses this process the GPU's MIG placements (it needs capability SYS_ADMIN)")

// migProfiles reads MIG mode and, when it is on, the profiles and their
// real placements.
func migProfiles(d nvml.Device, g *GPU) error {
	current, pending, ret := d.GetMigMode()
	if ret != nvml.SUCCESS {
		return nil // ERROR_NOT_SUPPORTED: a GPU without MIG
	}
	g.MIGPending = pending != current
	if current != nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	g.MIGEnabled = true
	for _, id := range publishedProfiles {
		info, ret := d.GetGpuInstanceProfileInfo(id)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return fmt.Errorf("MIG profile %d: %s", id, nvml.ErrorString(ret))
		}
		placements, ret := d.GetGpuInstancePossiblePlacements(&info)
		if ret == nvml.ERROR_NO_PERMISSION {
			return fmt.Errorf("MIG profile %d placements: %w", id, ErrMIGRefused)
		}
		if ret != nvml.SUCCESS {
			return fmt.Errorf("MIG profile %d placements: %s", id, nvml.ErrorString(ret))
		}
		p := MIGProfile{
			ID: id, CIProfileID: computeProfileFor[int(info.SliceCount)],
			Name:          profileName(int(info.SliceCount), int64(info.MemorySizeMB), g.MemoryMiB),
			ComputeSlices: int(info.SliceCount), Multiprocessors: int(info.MultiprocessorCount),
			MemoryMiB: int64(info.MemorySizeMB),
		}
		for _, pl := range placements {
			p.Placements = append(p.Placements, Placement{Start: int(pl.Start), Size: int(pl.Size)})
		}
		slices.SortFunc(p.Placements, func(a, b Placement) int { return a.Start - b.Start })
		g.MIGProfiles = append(g.MIGProfiles, p)
	}
	return nil
}

// MIGInstances lists the GPU instances of every profile (the agent
// publishes only some profiles, but an instance of any holds its slices).
func MIGInstances(d nvml.Device) ([]MIGInstance, error) {
	var out []MIGInstance
	for id := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := d.GetGpuInstanceProfileInfo(id)
		if ret != nvml.SUCCESS {
			continue // a profile this GPU does not have
		}
		gis, ret := d.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU instances of profile %d: %s", id, nvml.ErrorString(ret))
		}
		for _, gi := range gis {
			gInfo, ret := gi.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("GPU instance info: %s", nvml.ErrorString(ret))
			}
			out = append(out, MIGInstance{ID: int(gInfo.Id), Profile: id, Placement: Placement{Start: int(gInfo.Placement.Start), Size: int(gInfo.Placement.Size)}})
		}
	}
	slices.SortFunc(out, func(a, b MIGInstance) int { return a.Start - b.Start })
	return out, nil
}

// profileName is a MIG profile's name as nvidia-smi prints it: "1g.10gb".
func profileName(computeSlices int, profileMiB, gpuMiB int64) string {
	return fmt.Sprintf("%dg.%dgb", computeSlices, profileGB(uint64(profileMiB), gpuMiB))
}

// profileGB is the memory figure in a MIG profile's name, as NVIDIA's
// tools derive it: the profile's share of the GPU's memory rounded to
// eighths, times the GPU's memory in whole GB. (Dividing the profile's
// MiB by 1024 gives 39 for the A100 40GB's 7g.40gb.)
func profileGB(profileMiB uint64, gpuMiB int64) int64 {
	if gpuMiB <= 0 {
		return int64(math.Round(float64(profileMiB) / 1024))
	}
	eighths := math.Round(float64(profileMiB) / float64(gpuMiB) * 8)
	totalGB := float64((gpuMiB + 1023) / 1024)
	return int64(math.Round(eighths / 8 * totalGB))
}

// MemorySlices is how many memory slices the GPU has: the end of its
// furthest placement.
func (g GPU) MemorySlices() int {
	n := 0
	for _, p := range g.MIGProfiles {
		for _, pl := range p.Placements {
			n = max(n, pl.Start+pl.Size)
		}
	}
	return n
}

// ComputeSlices is how many compute slices the GPU has: its largest
// profile.
func (g GPU) ComputeSlices() int {
	n := 0
	for _, p := range g.MIGProfiles {
		n = max(n, p.ComputeSlices)
	}
	return n
}
