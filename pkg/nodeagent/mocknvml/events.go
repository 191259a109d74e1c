package mocknvml

import (
	"slices"
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
	bySet    map[nvml.EventSet]*eventSet
	waits    int
}

type eventSet struct {
	ch         chan nvml.EventData
	registered map[nvml.Device]uint64
	mu         sync.Mutex
}

func newEvents(s *server.Server) *events {
	e := &events{lost: map[int]bool{}, recovery: map[int]nvml.DeviceGpuRecoveryAction{}, bySet: map[nvml.EventSet]*eventSet{}}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return e.newSet(s), nvml.SUCCESS }
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(types uint64, es nvml.EventSet) nvml.Return {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.lost[i] {
				return nvml.ERROR_GPU_IS_LOST
			}
			set, ok := e.bySet[es]
			if !ok {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			set.mu.Lock()
			set.registered[dev] |= types
			set.mu.Unlock()
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

// newSet is an event set. As the driver's after an Xid 79, its Wait
// fails at once, every time, while a GPU registered with it is lost.
func (e *events) newSet(s *server.Server) nvml.EventSet {
	set := &eventSet{ch: make(chan nvml.EventData, 64), registered: map[nvml.Device]uint64{}}
	ms := &mock.EventSet{}
	ms.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
		e.mu.Lock()
		e.waits++
		lost := false
		set.mu.Lock()
		for i, l := range e.lost {
			lost = lost || l && set.registered[s.Devices[i]] != 0
		}
		set.mu.Unlock()
		e.mu.Unlock()
		select {
		case ev := <-set.ch: // events queued before the loss
			return ev, nvml.SUCCESS
		default:
		}
		if lost {
			return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
		}
		select {
		case ev := <-set.ch:
			return ev, nvml.SUCCESS
		case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	ms.FreeFunc = func() nvml.Return {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.sets = slices.DeleteFunc(e.sets, func(x *eventSet) bool { return x == set })
		delete(e.bySet, ms)
		return nvml.SUCCESS
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sets = append(e.sets, set)
	e.bySet[ms] = set
	return ms
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

// EventWaits counts the calls of the event sets' Wait.
func (s *Server) EventWaits() int {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	return s.events.waits
}

// Registered tells whether some event set receives Xid events of GPU index.
func (s *Server) Registered(index int) bool {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	return len(s.xidSets(index)) > 0
}
