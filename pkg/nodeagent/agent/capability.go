package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// capSysAdmin is CAP_SYS_ADMIN's bit in a Linux capability set.
const capSysAdmin = 21

// errNoSysAdmin says what a node with MIG GPUs needs and how to give it.
var errNoSysAdmin = errors.New("creating MIG instances needs capability SYS_ADMIN, which this container does not have: " +
	"apply manifests/nodeagent-mig (or install the chart with a mig rule in nodeAgent.config), which adds it")

// ProcessCanManageMIG reports whether this process holds CAP_SYS_ADMIN,
// which NVML requires to create and destroy MIG instances. The shipped
// DaemonSet adds it only where the config puts a GPU in MIG mode, so an
// agent configured for MIG without it stops at start with the fix,
// rather than failing every MIG claim at prepare.
func ProcessCanManageMIG() error {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	defer f.Close()
	return canManageMIG(f)
}

// canManageMIG reads the effective set (CapEff) of a /proc status file.
func canManageMIG(status io.Reader) error {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		hex, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		hex = strings.TrimSpace(hex)
		set, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			return fmt.Errorf("read capabilities: CapEff %q: %w", hex, err)
		}
		if set&(1<<capSysAdmin) == 0 {
			return errNoSysAdmin
		}
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	return errors.New("read capabilities: no CapEff line in /proc/self/status")
}
