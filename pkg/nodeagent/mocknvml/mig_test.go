package mocknvml_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// Like NVML, the mock gives a new instance the lowest free ID and
// refuses overlapping placements.
func TestGPUInstanceIDsAreReused(t *testing.T) {
	lib, err := mocknvml.NewWith(mocknvml.DGXH100, mocknvml.Options{MIG: true})
	if err != nil {
		t.Fatal(err)
	}
	gpu := lib.Devices[0]
	info, ret := gpu.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	create := func(start uint32) (nvml.GpuInstance, uint32) {
		t.Helper()
		gi, ret := gpu.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: 1})
		if ret != nvml.SUCCESS {
			t.Fatalf("create at %d: %s", start, nvml.ErrorString(ret))
		}
		i, _ := gi.GetInfo()
		return gi, i.Id
	}
	first, id0 := create(0)
	_, id1 := create(1)
	if id0 != 0 || id1 != 1 {
		t.Errorf("IDs %d, %d, want 0, 1", id0, id1)
	}
	if _, ret := gpu.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 1, Size: 1}); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("overlapping placement: %s", nvml.ErrorString(ret))
	}
	if ret := first.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	gi, id := create(5)
	if id != 0 {
		t.Errorf("new instance got ID %d, want the freed 0", id)
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	createCI := func() (nvml.ComputeInstance, uint32) {
		t.Helper()
		ci, ret := gi.CreateComputeInstance(&ciInfo)
		if ret != nvml.SUCCESS {
			t.Fatal(nvml.ErrorString(ret))
		}
		i, _ := ci.GetInfo()
		return ci, i.Id
	}
	ci, _ := createCI()
	createCI()
	ci.Destroy()
	if _, id := createCI(); id != 0 {
		t.Errorf("new compute instance got ID %d, want the freed 0", id)
	}
}
