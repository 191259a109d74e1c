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
	f := &faultFile{path: path}
	for {
		lines, err := f.next()
		if err != nil {
			bad(f.line, err)
		}
		for _, text := range lines {
			f.line++
			if err := s.applyFault(strings.Fields(text)); err != nil {
				bad(f.line, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// faultFile is what of a fault file was read: up to offset, line lines.
type faultFile struct {
	path    string
	offset  int64
	line    int
	failing error // the error reading it, said once
}

// next returns the whole lines written since it was last read (a writer
// may be half-way through the last one), all of a file written anew
// (> rather than >>), none of one that does not exist yet; and an error
// reading it, once until reading works again.
func (f *faultFile) next() ([]string, error) {
	raw, size, err := readFrom(f.path, f.offset)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		said := f.failing != nil && f.failing.Error() == err.Error()
		f.failing = err
		if said {
			return nil, nil
		}
		return nil, err
	}
	f.failing = nil
	if size < f.offset {
		f.offset, f.line = 0, 0
		if raw, _, err = readFrom(f.path, 0); err != nil {
			return nil, nil // said at the next read
		}
	}
	end := bytes.LastIndexByte(raw, '\n')
	if end < 0 {
		return nil, nil
	}
	f.offset += int64(end + 1)
	return strings.Split(string(raw[:end]), "\n"), nil
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
