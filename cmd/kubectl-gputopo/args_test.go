package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Arguments are checked before any cluster is reached: a stray word or
// another command's flag is an error, not silently dropped (a dropped
// --context would query another cluster).
func TestArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nodes", "gpu-node-1", "--context=other"}, `nodes: unexpected argument "gpu-node-1"`},
		{[]string{"why"}, "why: name the pod"},
		{[]string{"why", "-n", "team"}, "why: name the pod"},
		{[]string{"why", "a", "b"}, `why: unexpected argument "b"`},
		{[]string{"why", "p", "--node=x"}, "why: flag provided but not defined: -node"},
		{[]string{"report", "--node=x"}, "report: flag provided but not defined: -node"},
		{[]string{"nodes", "--request-timeout=soon"}, `invalid value "soon" for flag -request-timeout`},
	} {
		err := run(context.Background(), tc.args, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"nodes", "-h"}, {"--help"}, {"-h"}, {"help"}} {
		var help strings.Builder
		if err := run(context.Background(), args, &help); err != nil || !strings.Contains(help.String(), "usage: kubectl gputopo nodes") {
			t.Errorf("%v: %v, printed %q", args, err, help.String())
		}
	}
}

// --request-timeout reads as kubectl's: a duration or a number of seconds.
func TestRequestTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{"30": 30 * time.Second, "0": 0, "1m": time.Minute, "250ms": 250 * time.Millisecond} {
		var got requestTimeout
		if err := got.Set(v); err != nil || time.Duration(got) != want {
			t.Errorf("%q: %v, %v; want %v", v, time.Duration(got), err, want)
		}
	}
	for _, v := range []string{"soon", "-5s", ""} {
		var got requestTimeout
		if err := got.Set(v); err == nil {
			t.Errorf("%q accepted as %v", v, time.Duration(got))
		}
	}
}

// why looks in the namespace -n names, before or after the pod, and
// otherwise in the kubeconfig context's namespace, as kubectl does.
func TestWhyNamespace(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer api.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: team-a}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"why", "train-0", "--kubeconfig", kubeconfig}, "/api/v1/namespaces/team-a/pods/train-0"},
		{[]string{"why", "-n", "team-b", "train-0", "--kubeconfig", kubeconfig}, "/api/v1/namespaces/team-b/pods/train-0"},
		{[]string{"why", "train-0", "-n", "team-b", "--kubeconfig", kubeconfig}, "/api/v1/namespaces/team-b/pods/train-0"},
		{[]string{"why", "train-0", "--namespace=team-c", "--kubeconfig", kubeconfig, "--request-timeout=5"}, "/api/v1/namespaces/team-c/pods/train-0"},
	} {
		mu.Lock()
		paths = nil
		mu.Unlock()
		if err := run(context.Background(), tc.args, &strings.Builder{}); err == nil {
			t.Errorf("%v: no error for a pod the API server does not have", tc.args)
		}
		mu.Lock()
		got := slices.Contains(paths, tc.want)
		mu.Unlock()
		if !got {
			t.Errorf("%v: requests %v, want %s", tc.args, paths, tc.want)
		}
	}
}

// report --out into a directory that does not exist, or naming a
// directory, fails before the cluster is read.
func TestReportOutCheckedFirst(t *testing.T) {
	requests := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer api.Close()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{filepath.Join(dir, "missing", "x.html"), filepath.Join(kubeconfig, "x.html"), dir} {
		err := run(context.Background(), []string{"report", "--out", out, "--kubeconfig", kubeconfig}, &strings.Builder{})
		if err == nil || !strings.HasPrefix(err.Error(), "--out "+out) {
			t.Errorf("--out %s: error %v, want one naming --out", out, err)
		}
	}
	if requests != 0 {
		t.Errorf("%d requests to the API server before the output was checked", requests)
	}
}
