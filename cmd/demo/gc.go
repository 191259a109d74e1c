package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// gcPercent is the garbage collection target the demo sets unless GOGC
// is given: a replay allocates much short-lived state (the scheduler's
// snapshot, upstream's copy of the cluster's allocated devices for every
// pod), and at Go's default of 100 collecting it takes a tenth to a fifth
// of a replay's CPU. The demo is a batch job, so it spends memory instead
// (default trace, all 1,213 nodes, seed 1: 281 s and 1.3 GB at 100, 253 s
// and 2.8 GB at 400), bounded by memoryLimit.
const gcPercent = 400

// tuneGC raises the collection target where the machine's memory is
// known, with a soft limit at half of it so that many replays at once
// (--parallel) collect harder instead of running out; GOGC or
// GOMEMLIMIT in the environment leave Go's own settings.
func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	total, err := physicalMemory()
	if err != nil {
		return
	}
	debug.SetMemoryLimit(total / 2)
	debug.SetGCPercent(gcPercent)
}

// physicalMemory reads MemTotal from /proc/meminfo (Linux), in bytes.
func physicalMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return memTotal(bufio.NewScanner(f))
}

func memTotal(s *bufio.Scanner) (int64, error) {
	for s.Scan() {
		var kib int64
		if _, err := fmt.Sscanf(s.Text(), "MemTotal: %d kB", &kib); err == nil && strings.HasPrefix(s.Text(), "MemTotal:") {
			return kib << 10, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal line")
}
