package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcPercent is the garbage collection target the demo sets: a replay
// allocates much short-lived state (the scheduler's snapshot, upstream's
// copy of the cluster's allocated devices for every pod), and at Go's
// default of 100 collecting it took 23% of a full-fleet openb replay's
// CPU. The demo is a batch job, so it spends memory instead (default
// trace, all 1,213 nodes, seed 1, one replay alone on 2 cores: 281 s and
// 1.3 GB resident at 100, 253 s and 2.8 GB at 400).
const gcPercent = 400

// tuneGC raises the collection target where the memory the process may
// use is known, with a soft limit at half of it, so that many replays at
// once (--parallel) collect harder as they near it. GOGC or GOMEMLIMIT
// in the environment leave Go's own settings.
func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	avail, err := availableMemory()
	if err != nil || avail <= 0 {
		return
	}
	debug.SetMemoryLimit(avail / 2)
	debug.SetGCPercent(gcPercent)
}

// availableMemory is the machine's memory (Linux, /proc/meminfo), or the
// container's limit (cgroup v2 memory.max) where that is lower: in a
// pod, /proc/meminfo reports the host's.
func availableMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	total, err := memTotal(f)
	if err != nil {
		return 0, err
	}
	if raw, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, ok := cgroupLimit(string(raw)); ok {
			total = min(total, limit)
		}
	}
	return total, nil
}

// memTotal reads MemTotal from /proc/meminfo's format, in bytes.
func memTotal(r io.Reader) (int64, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		if !strings.HasPrefix(s.Text(), "MemTotal:") {
			continue
		}
		var kib int64
		if _, err := fmt.Sscanf(s.Text(), "MemTotal: %d kB", &kib); err != nil {
			return 0, fmt.Errorf("/proc/meminfo: %q: %w", s.Text(), err)
		}
		return kib << 10, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo: no MemTotal line")
}

// cgroupLimit parses memory.max: bytes, or "max" for none.
func cgroupLimit(raw string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	return n, err == nil && n > 0
}
