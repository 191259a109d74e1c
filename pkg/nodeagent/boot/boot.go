// Package boot tells one boot of the node from the next. What an agent
// keeps across its restarts (a GPU's health taint, the MIG instances it
// made) means something else after a reboot, which resets every GPU and
// destroys every MIG instance.
package boot

import (
	"os"
	"strings"
)

// IDPath is where Linux says which boot this is.
const IDPath = "/proc/sys/kernel/random/boot_id"

// ID is this boot's ID as the file at path says, "" when it cannot be
// read.
func ID(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// Changed says whether the boot recorded as was is not the boot now;
// false when either is unknown.
func Changed(was, now string) bool {
	return was != "" && now != "" && was != now
}
