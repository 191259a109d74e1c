package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/version"
)

func TestVersionRequest(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--config=/etc/kubernetes/scheduler.yaml", "-v=4"}, ""},
		{[]string{"--version"}, "true"},
		{[]string{"--config", "c.yaml", "--version=true"}, "true"},
		{[]string{"--version=1"}, "true"},
		{[]string{"--version=raw"}, "raw"},
		{[]string{"--version=false"}, ""},
		{[]string{"--version", "--version=false"}, ""},
		{[]string{"--version=false", "--version"}, "true"},
		// kube-scheduler's: sets the reported Kubernetes version, runs on.
		{[]string{"--version=v1.37.0"}, ""},
		{[]string{"--", "--version"}, ""},
		{[]string{"--versions"}, ""},
	}
	for _, tc := range tests {
		if got := versionRequest(tc.args); got != tc.want {
			t.Errorf("versionRequest(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestPrintVersion(t *testing.T) {
	var b bytes.Buffer
	if !printVersion(&b, "true") {
		t.Fatal("--version printed nothing")
	}
	if got, want := b.String(), "gputopo-scheduler "+version.Get()+" ("+runtime.Version(); !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 {
		t.Errorf("--version printed %q, want one line starting %q", got, want)
	}
	b.Reset()
	if !printVersion(&b, "raw") || !strings.HasPrefix(b.String(), "gputopo-scheduler ") || !strings.Contains(b.String(), "\ndep\t") {
		t.Errorf("--version=raw printed %q, want the line and the build information", b.String())
	}
	b.Reset()
	if printVersion(&b, "") || b.Len() != 0 {
		t.Errorf("no --version printed %q", b.String())
	}
}
