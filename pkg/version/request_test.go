package version

import (
	"flag"
	"strings"
	"testing"
)

func TestRequestFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    Request
		wantErr string
	}{
		{nil, "", ""},
		{[]string{"--version"}, RequestLine, ""},
		{[]string{"--version=1"}, RequestLine, ""},
		{[]string{"--version=raw"}, RequestRaw, ""},
		{[]string{"--version=raw", "--version=false"}, "", ""},
		{[]string{"--version=v1.37.0"}, "", `"v1.37.0": want true, false or raw`},
	}
	for _, tc := range tests {
		var r Request
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(&strings.Builder{})
		fs.Var(&r, "version", "")
		err := fs.Parse(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || r != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.args, r, err, tc.want)
		}
	}
}

func TestRequestPrint(t *testing.T) {
	var b strings.Builder
	if printed, err := Request("").Print(&b, "prog"); printed || err != nil || b.Len() > 0 {
		t.Errorf("no request printed %q (%v, %v)", b.String(), printed, err)
	}
	if printed, err := RequestLine.Print(&b, "prog"); !printed || err != nil || strings.Count(b.String(), "\n") != 1 || !strings.HasPrefix(b.String(), "prog ") {
		t.Errorf("line request printed %q (%v, %v)", b.String(), printed, err)
	}
	b.Reset()
	if printed, err := RequestRaw.Print(&b, "prog"); !printed || err != nil || !strings.Contains(b.String(), "\nbuild\tCGO_ENABLED=") {
		t.Errorf("raw request printed %q (%v, %v), want the build information", b.String(), printed, err)
	}
}
