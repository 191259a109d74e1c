package health

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
)

// lookForRecovery records evidence that a GPU that answers recovered from
// a fatal Xid. An operator's acknowledgement always counts. With
// fatalRecovery "reset" a reset seen through NVML counts too: the GPU
// answering again after a probe found it lost (a lost GPU comes back
// only through a reset), or its recovery action back to none after NVML
// asked for one. A driver that never asks for one (older than the
// field) leaves the operator's acknowledgement.
func (m *Monitor) lookForRecovery(ctx context.Context, uuid string, d nvml.Device, s *gpuState) {
	var why string
	switch {
	case m.acked(uuid):
		why = "operator acknowledgement"
	case m.opts.Policy.FatalRecovery == config.RecoverByOperator:
		return
	case s.evidence.lost:
		why = "GPU answers again after it was lost"
	default:
		action, ok := recoveryAction(d)
		if !ok {
			return
		}
		if action != nvml.GPU_RECOVERY_ACTION_NONE {
			s.evidence.actionPending = true
			return
		}
		if !s.evidence.actionPending {
			return
		}
		why = "recovery action done"
	}
	s.evidence.recovered = true
	klog.FromContext(ctx).Info("GPU recovered from a fatal Xid", "uuid", uuid, "evidence", why)
}

// recoveryAction reads the action NVML says the GPU needs to recover
// (FI_DEV_GET_GPU_RECOVERY_ACTION); false when it cannot tell.
func recoveryAction(d nvml.Device) (nvml.DeviceGpuRecoveryAction, bool) {
	v := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	if ret := d.GetFieldValues(v); ret != nvml.SUCCESS || nvml.Return(v[0].NvmlReturn) != nvml.SUCCESS {
		return 0, false
	}
	switch nvml.ValueType(v[0].ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return nvml.DeviceGpuRecoveryAction(binary.NativeEndian.Uint64(v[0].Value[:])), true
	default:
		return nvml.DeviceGpuRecoveryAction(binary.NativeEndian.Uint32(v[0].Value[:4])), true
	}
}

// acked tells whether the operator acknowledged the GPU's recovery: a
// file named after its UUID in the acknowledgement directory.
func (m *Monitor) acked(uuid string) bool {
	if m.opts.AckDir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(m.opts.AckDir, uuid))
	return err == nil
}

// clearAck removes the GPU's acknowledgement: at a fatal Xid (only one
// written after it counts) and when its taint lifts (used up).
func (m *Monitor) clearAck(ctx context.Context, uuid string) {
	if m.opts.AckDir == "" {
		return
	}
	if err := os.Remove(filepath.Join(m.opts.AckDir, uuid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.FromContext(ctx).Error(err, "Removing a GPU recovery acknowledgement", "uuid", uuid)
	}
}
