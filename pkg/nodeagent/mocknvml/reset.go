package mocknvml

import (
	"encoding/binary"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// wireRecovery makes GPU index answer NVML's field query for its GPU
// recovery action (FI_DEV_GET_GPU_RECOVERY_ACTION), the action the driver
// asks for after a fatal error: none until a test sets one. Other fields
// are not supported.
func (e *events) wireRecovery(index int, dev *server.Device) {
	dev.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
		if len(values) == 0 {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if e.isLost(index) {
			return nvml.ERROR_GPU_IS_LOST
		}
		e.mu.Lock()
		action := e.recovery[index]
		e.mu.Unlock()
		for i := range values {
			v := &values[i]
			if v.FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
				v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			v.NvmlReturn, v.ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.NativeEndian.PutUint32(v.Value[:4], uint32(action))
		}
		return nvml.SUCCESS
	}
}

// SetRecoveryAction sets the recovery action NVML reports for GPU index,
// as the driver does after a fatal Xid (GPU_RECOVERY_ACTION_GPU_RESET).
func (s *Server) SetRecoveryAction(index int, action nvml.DeviceGpuRecoveryAction) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	s.events.recovery[index] = action
}

// ResetGPU simulates a GPU reset: GPU index answers again and its
// recovery action is back to none.
func (s *Server) ResetGPU(index int) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	s.events.lost[index] = false
	s.events.recovery[index] = nvml.GPU_RECOVERY_ACTION_NONE
}
