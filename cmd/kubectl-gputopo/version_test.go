package main

import (
	"context"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/version"
)

// version needs no kubeconfig or cluster.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"--version=true"}} {
		var b strings.Builder
		if err := run(context.Background(), args, &b); err != nil {
			t.Errorf("run %v: %v", args, err)
		}
		if got, want := b.String(), "kubectl-gputopo "+version.Get()+" ("; !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 {
			t.Errorf("run %v printed %q, want one line starting %q", args, got, want)
		}
	}
	for _, arg := range []string{"--version=raw", "-version=raw"} {
		var b strings.Builder
		if err := run(context.Background(), []string{arg}, &b); err != nil {
			t.Errorf("run %s: %v", arg, err)
		}
		if got := b.String(); !strings.HasPrefix(got, "kubectl-gputopo ") || !strings.Contains(got, "\tCGO_ENABLED=") {
			t.Errorf("%s printed %q, want the line and the build settings", arg, got)
		}
	}
	if err := run(context.Background(), []string{"--version=yes"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "want true, false or raw") {
		t.Errorf("run --version=yes: %v, want the values named", err)
	}
	if err := run(context.Background(), []string{"versions"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "kubectl gputopo version") {
		t.Errorf("run [versions]: %v, want the usage naming version", err)
	}
}
