package mocknvml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// FollowFaults shows the mock GPUs the faults written to path, one a
// line, as lines are appended: "xid INDEX CODE" delivers an Xid critical
// error of GPU INDEX to the event sets it is registered with, "lost
// INDEX" makes it answer as a GPU fallen off the bus, "found INDEX"
// brings it back. It is how a node agent on mock NVML that runs as its
// own process (--mock-faults) is shown GPU failures, in tests and
// demos. A file that does not exist yet is waited for, one written anew
// is read from its start; a line that is not a fault is reported to bad,
// with its number, and skipped, and an error reading the file once until
// reading works again. It returns when ctx is done.
func (s *Server) FollowFaults(ctx context.Context, path string, every time.Duration, bad func(line int, err error)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var offset int64
	line := 0
	var failing error // said once until reading works again
	for {
		raw, size, err := readFrom(path, offset)
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			if failing == nil || failing.Error() != err.Error() {
				bad(line, err)
			}
			failing = err
		case size < offset:
			// Written anew (> rather than >>): read it from its start.
			offset, line, failing = 0, 0, nil
			raw, _, err = readFrom(path, 0)
			if err != nil {
				raw = nil
			}
		default:
			failing = nil
		}
		// Only whole lines: a writer may be half-way through one.
		if end := bytes.LastIndexByte(raw, '\n'); end >= 0 {
			for _, text := range strings.Split(string(raw[:end]), "\n") {
				line++
				if err := s.applyFault(strings.Fields(text)); err != nil {
					bad(line, err)
				}
			}
			offset += int64(end + 1)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readFrom reads path from offset to its end, and says how long the
// file is; nothing when it is shorter than offset.
func readFrom(path string, offset int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if info.Size() < offset {
		return nil, info.Size(), nil
	}
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, 0, err
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), info.Size(), err
}

// applyFault applies one line's fields; an empty line is none.
func (s *Server) applyFault(fields []string) error {
	if len(fields) == 0 {
		return nil
	}
	want := map[string]int{"xid": 3, "lost": 2, "found": 2}
	n, known := want[fields[0]]
	if !known || len(fields) != n {
		return fmt.Errorf("%q: want \"xid INDEX CODE\", \"lost INDEX\" or \"found INDEX\"", strings.Join(fields, " "))
	}
	index, err := strconv.Atoi(fields[1])
	if err != nil || index < 0 || index >= len(s.Devices) {
		return fmt.Errorf("%q: GPU index %q: want 0 to %d", strings.Join(fields, " "), fields[1], len(s.Devices)-1)
	}
	switch fields[0] {
	case "xid":
		code, err := strconv.ParseUint(fields[2], 10, 64)
		if err != nil {
			return fmt.Errorf("%q: Xid %q is not a number", strings.Join(fields, " "), fields[2])
		}
		s.InjectXid(index, code)
	case "lost", "found":
		s.SetLost(index, fields[0] == "lost")
	}
	return nil
}
