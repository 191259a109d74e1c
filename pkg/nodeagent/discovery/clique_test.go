package discovery_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// The clique is pending only while the fabric is being set up; a fabric
// that failed, or none, has no clique to wait for. A read that fails
// says nothing about the clique.
func TestReadClique(t *testing.T) {
	cluster := [16]uint8{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	for name, tc := range map[string]struct {
		info        nvml.GpuFabricInfo
		ret         nvml.Return
		want        string
		wantPending bool
		failed      bool
	}{
		"set up": {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, ClusterUuid: cluster, CliqueId: 7}, ret: nvml.SUCCESS,
			want: "12345678-9abc-def0-0123-456789abcdef.7"},
		"not started":            {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_NOT_STARTED}, ret: nvml.SUCCESS, wantPending: true},
		"in progress":            {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_IN_PROGRESS}, ret: nvml.SUCCESS, wantPending: true},
		"set up with an error":   {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.ERROR_UNKNOWN), ClusterUuid: cluster}, ret: nvml.SUCCESS},
		"set up, no cluster":     {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED}, ret: nvml.SUCCESS},
		"no multi-node NVLink":   {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, ret: nvml.ERROR_NOT_SUPPORTED},
		"unsupported, but reads": {info: nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, ret: nvml.SUCCESS},
		"a driver without it":    {ret: nvml.ERROR_FUNCTION_NOT_FOUND},
		"the GPU lost":           {ret: nvml.ERROR_GPU_IS_LOST, failed: true},
		"the GPU resetting":      {ret: nvml.ERROR_RESET_REQUIRED, failed: true},
	} {
		t.Run(name, func(t *testing.T) {
			d := &mock.Device{GetGpuFabricInfoFunc: func() (nvml.GpuFabricInfo, nvml.Return) { return tc.info, tc.ret }}
			got, pending, ok := discovery.ReadClique(d)
			if got != tc.want || pending != tc.wantPending || ok == tc.failed {
				t.Errorf("ReadClique = %q, pending %v, ok %v; want %q, pending %v, ok %v", got, pending, ok, tc.want, tc.wantPending, !tc.failed)
			}
		})
	}
}
