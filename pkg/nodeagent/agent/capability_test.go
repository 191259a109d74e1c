package agent

import (
	"errors"
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
		"a CapEff that is no hex number": {status: "CapEff:\tzz\n", text: `CapEff "\tzz"`},
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
