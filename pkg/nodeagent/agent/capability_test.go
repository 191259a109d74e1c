package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCanManageMIG(t *testing.T) {
	for name, tc := range map[string]struct {
		status string
		want   error // nil: allowed
		text   string
	}{
		"root's full set":                {status: "Name:\tnodeagent\nCapEff:\t000001ffffffffff\n"},
		"SYS_ADMIN alone":                {status: "CapEff:\t0000000000200000\n"},
		"every capability dropped":       {status: "CapEff:\t0000000000000000\n", want: errNoSysAdmin},
		"the runtime's default set":      {status: "CapEff:\t00000000a80425fb\n", want: errNoSysAdmin},
		"no CapEff line":                 {status: "Name:\tx\n", text: "no CapEff line"},
		"a CapEff that is no hex number": {status: "CapEff:\tzz\n", text: `CapEff "zz"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := canManageMIG(strings.NewReader(tc.status))
			switch {
			case tc.text != "":
				if err == nil || !strings.Contains(err.Error(), tc.text) {
					t.Errorf("error %v, want one containing %q", err, tc.text)
				}
			case !errors.Is(err, tc.want):
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// The error names the overlay that grants the capability, and it exists.
func TestNoSysAdminNamesTheOverlay(t *testing.T) {
	const overlay = "manifests/nodeagent-mig"
	if !strings.Contains(errNoSysAdmin.Error(), overlay) {
		t.Fatalf("%q does not name %s", errNoSysAdmin, overlay)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "..", overlay, "kustomization.yaml")); err != nil {
		t.Errorf("the error names %s: %v", overlay, err)
	}
}
