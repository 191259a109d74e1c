package mocknvml_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// Faults appended to the file reach the mock GPUs as they are written,
// a line at a time (a half-written one waits for its end); a line that
// is no fault is reported with its number and the rest still apply.
func TestFollowFaults(t *testing.T) {
	lib, err := mocknvml.New(mocknvml.DGXH100)
	if err != nil {
		t.Fatal(err)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	set, _ := lib.EventSetCreate()
	gpu3, _ := lib.DeviceGetHandleByIndex(3)
	if ret := gpu3.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	path := filepath.Join(t.TempDir(), "faults")
	var mu sync.Mutex
	var bad []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go lib.FollowFaults(ctx, path, 10*time.Millisecond, func(line int, err error) {
		mu.Lock()
		defer mu.Unlock()
		bad = append(bad, strings.Repeat("#", line)+err.Error())
	})
	appendTo := func(text string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(30 * time.Millisecond) // no file yet: waited for
	appendTo("xid 3 79\nreboot 2\nlost 5\nxid 3 4")
	ev, ret := set.Wait(2000)
	if ret != nvml.SUCCESS || ev.EventData != 79 {
		t.Fatalf("event %+v (%s), want Xid 79 of GPU 3", ev, nvml.ErrorString(ret))
	}
	if _, ret := set.Wait(100); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("a second event (%s) before its line ended", nvml.ErrorString(ret))
	}
	gpu5, _ := lib.DeviceGetHandleByIndex(5)
	if _, ret := gpu5.GetUUID(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("GPU 5 after lost: %s, want it lost", nvml.ErrorString(ret))
	}
	appendTo("8\nfound 5\n")
	if ev, ret := set.Wait(2000); ret != nvml.SUCCESS || ev.EventData != 48 {
		t.Errorf("event %+v (%s), want Xid 48 once its line ended", ev, nvml.ErrorString(ret))
	}
	time.Sleep(50 * time.Millisecond)
	if _, ret := gpu5.GetUUID(); ret != nvml.SUCCESS {
		t.Errorf("GPU 5 after lost and found: %s", nvml.ErrorString(ret))
	}
	// Written anew (> rather than >>): read from its start.
	if err := os.WriteFile(path, []byte("xid 3 31\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ev, ret := set.Wait(2000); ret != nvml.SUCCESS || ev.EventData != 31 {
		t.Errorf("event %+v (%s), want Xid 31 from the file written anew", ev, nvml.ErrorString(ret))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "##\"reboot 2\"") {
		t.Errorf("reported %q, want line 2 only", bad)
	}
}
