package contract

import "testing"

func TestExtendedRequestContainer(t *testing.T) {
	for name, want := range map[string]int{
		"container-0-request-0":   0,
		"container-12-request-3":  12,
		ExtendedRequestName(7, 2): 7,
		"container-1-request-0x":  -1,
		"container-+1-request-0":  -1,
		"container-01-request-0":  -1,
		"container--1-request-0":  -1,
		"gpu":                     -1,
		"container-1":             -1,
		"":                        -1,
	} {
		got, ok := ExtendedRequestContainer(name)
		if want < 0 && ok || want >= 0 && (!ok || got != want) {
			t.Errorf("ExtendedRequestContainer(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

func TestIsMemorySliceCounter(t *testing.T) {
	for name, want := range map[string]bool{
		MemorySliceCounter(0): true, MemorySliceCounter(7): true,
		"memory-slice-3": true, // NVIDIA's DRA driver
		"memory":         false, "memory-slice-": false, "memoryX": false, CounterCompute: false, "multiprocessors": false,
	} {
		if got := IsMemorySliceCounter(name); got != want {
			t.Errorf("IsMemorySliceCounter(%q) = %v, want %v", name, got, want)
		}
	}
}
