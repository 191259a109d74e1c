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
		// A flag without its value does not take the next flag as it.
		{[]string{"nodes", "--node", "--kubeconfig=b"}, `flag --node: missing value ("--kubeconfig=b" is a flag`},
		{[]string{"nodes", "--as", "--context=prod"}, `flag --as: missing value`},
		{[]string{"nodes", "--as=u", "--as-group", "--context=prod"}, `flag --as-group: missing value`},
		{[]string{"why", "-n", "--context=prod", "p"}, `flag -n: missing value`},
		{[]string{"report", "--out", "--kubeconfig=b"}, `flag --out: missing value`},
		{[]string{"--context", "--kubeconfig=b", "nodes"}, `flag --context: missing value`},
		// Written with "=", a value may start with "-": only the cluster
		// it names is then unreachable.
		{[]string{"nodes", "--context=-dev", "--kubeconfig=/nonexistent/kc"}, `kubeconfig`},
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
	kubeconfig := kubeconfigFor(t, api.URL)
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

// The cluster flags come before the command too, as kubectl's ("kubectl
// gputopo --context prod nodes"), and --as, --as-group and --as-uid
// impersonate as kubectl's do.
func TestClusterFlags(t *testing.T) {
	type request struct{ server, path, user, uid, groups string }
	var mu sync.Mutex
	var got []request
	server := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, request{name, r.URL.Path, r.Header.Get("Impersonate-User"), r.Header.Get("Impersonate-Uid"), strings.Join(r.Header.Values("Impersonate-Group"), ",")})
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"denied","code":403}`))
		}))
	}
	dev, prod := server("dev"), server("prod")
	defer dev.Close()
	defer prod.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "`+dev.URL+`"}}, {name: prod, cluster: {server: "`+prod.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: dev, context: {cluster: dev, user: u}}, {name: prod, context: {cluster: prod, user: u, namespace: team}}]
current-context: dev
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want request
	}{
		{[]string{"--context", "prod", "nodes", "--kubeconfig", kubeconfig}, request{"prod", "/apis/resource.k8s.io/v1/resourceslices", "", "", ""}},
		{[]string{"--kubeconfig=" + kubeconfig, "--context=prod", "--request-timeout", "5", "why", "p"}, request{"prod", "/api/v1/namespaces/team/pods/p", "", "", ""}},
		{[]string{"--as", "alice", "--as-group", "ml", "--as-group=ops", "report", "--kubeconfig", kubeconfig, "--as-uid", "42"}, request{"dev", "/apis/resource.k8s.io/v1/resourceslices", "alice", "42", "ml,ops"}},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		if err := run(context.Background(), tc.args, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("%v: error %v, want the server's refusal", tc.args, err)
		}
		mu.Lock()
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("%v: requests %+v, want first %+v", tc.args, got, tc.want)
		}
		mu.Unlock()
	}
	for args, want := range map[string]string{
		"--as-group ml nodes --kubeconfig " + kubeconfig: "without impersonating a user",
		"--context prod":       "unknown or missing command",
		"--context prod bogus": "unknown or missing command",
		"--node x report":      "report: flag provided but not defined: -node",
	} {
		if err := run(context.Background(), strings.Fields(args), &strings.Builder{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", args, err, want)
		}
	}
}

// kubeconfigFor writes a kubeconfig for the API server at url, whose
// context's namespace is team-a.
func kubeconfigFor(t *testing.T, url string) string {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+url+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: team-a}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// A read the API server refuses says which role grants what the plugin
// reads, for every command.
func TestForbiddenNamesTheRole(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"forbidden: User \"alice\" cannot list resource","code":403}`))
	}))
	defer api.Close()
	kubeconfig := kubeconfigFor(t, api.URL)
	for _, args := range [][]string{{"nodes"}, {"why", "train-0"}, {"report"}} {
		err := run(context.Background(), append(args, "--kubeconfig", kubeconfig), &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), "User \"alice\" cannot") || !strings.Contains(err.Error(), "gputopo-viewer ClusterRole of manifests/kubectl") {
			t.Errorf("%v: %v, want the API server's refusal and the role that grants the reads", args, err)
		}
	}
}
