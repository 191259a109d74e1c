package mocknvml

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// events delivers injected NVML events to the event sets of the server,
// marks GPUs lost as NVML does when a GPU falls off the bus, and keeps
// the recovery action NVML reports per GPU (reset.go).
type events struct {
	mu       sync.Mutex
	sets     []*eventSet
	lost     map[int]bool
	recovery map[int]nvml.DeviceGpuRecoveryAction
}

type eventSet struct {
	ch         chan nvml.EventData
	registered map[nvml.Device]uint64
	mu         sync.Mutex
}

func newEvents(s *server.Server) *events {
	e := &events{lost: map[int]bool{}, recovery: map[int]nvml.DeviceGpuRecoveryAction{}}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set := &eventSet{ch: make(chan nvml.EventData, 64), registered: map[nvml.Device]uint64{}}
		e.mu.Lock()
		e.sets = append(e.sets, set)
		e.mu.Unlock()
		return &mock.EventSet{
			WaitFunc: func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
				select {
				case ev := <-set.ch:
					return ev, nvml.SUCCESS
				case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(types uint64, es nvml.EventSet) nvml.Return {
			e.mu.Lock()
			defer e.mu.Unlock()
			for _, set := range e.sets {
				set.mu.Lock()
				set.registered[dev] |= types
				set.mu.Unlock()
			}
			return nvml.SUCCESS
		}
		// A lost GPU answers every query with ERROR_GPU_IS_LOST.
		uuid, mem := dev.GetUUIDFunc, dev.GetMemoryInfoFunc
		dev.GetUUIDFunc = func() (string, nvml.Return) {
			if e.isLost(i) {
				return "", nvml.ERROR_GPU_IS_LOST
			}
			return uuid()
		}
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			if e.isLost(i) {
				return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
			}
			return mem()
		}
		e.wireRecovery(i, dev)
	}
	return e
}

func (e *events) isLost(i int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lost[i]
}

// xidSets are the event sets registered for GPU index's Xid events.
// Callers hold s.events.mu.
func (s *Server) xidSets(index int) []*eventSet {
	var out []*eventSet
	for _, set := range s.events.sets {
		set.mu.Lock()
		types := set.registered[s.Devices[index]]
		set.mu.Unlock()
		if types&nvml.EventTypeXidCriticalError != 0 {
			out = append(out, set)
		}
	}
	return out
}

// InjectXid delivers an Xid critical error event for GPU index to every
// event set the GPU is registered with.
func (s *Server) InjectXid(index int, xid uint64) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	for _, set := range s.xidSets(index) {
		set.ch <- nvml.EventData{Device: s.Devices[index], EventType: nvml.EventTypeXidCriticalError, EventData: xid,
			GpuInstanceId: 0xffffffff, ComputeInstanceId: 0xffffffff}
	}
}

// SetLost marks GPU index lost (fallen off the bus) or back.
func (s *Server) SetLost(index int, lost bool) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	s.events.lost[index] = lost
}

// Registered tells whether some event set receives Xid events of GPU index.
func (s *Server) Registered(index int) bool {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	return len(s.xidSets(index)) > 0
}
