// Command kubectl-gputopo is a kubectl plugin (kubectl gputopo ...) that
// shows a cluster's GPUs the way gputopo's scheduler sees them. It reads
// through any kubeconfig; the read-only role it needs is in
// manifests/kubectl (docs/kubectl.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gputopo/gputopo/pkg/inspect"
	"github.com/gputopo/gputopo/pkg/version"
)

const usage = `usage: kubectl gputopo nodes [--node NAME] [CLUSTER FLAGS]
       kubectl gputopo why POD [-n|--namespace NAMESPACE] [CLUSTER FLAGS]
       kubectl gputopo report [--out FILE] [CLUSTER FLAGS]
       kubectl gputopo version

  CLUSTER FLAGS, before or after the command, as kubectl's:
          --kubeconfig FILE, --context NAME, --request-timeout 30s,
          --as USER, --as-group GROUP (repeatable), --as-uid UID

  nodes   each node's devices grouped by NVLink domain and clique, with the
          claims (and their pods) that hold them
  why     where a pod stands: bound with which devices and why, or pending
          with the scheduler's reasons, and what its claims ask for
  report  an HTML page of the cluster as it is now: GPU occupancy by node
          and NVLink domain, link classes of claims, fragmentation, and the
          pending pods with their reasons (--out FILE, default stdout)
  version the plugin's version (also --version; --version=raw adds the
          build information)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl-gputopo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if printed, err := printVersion(args, out); printed || err != nil {
		return err
	}
	cmd, args := splitCommand(args)
	if cmd == "help" || cmd == "" && slices.ContainsFunc(args, isHelp) {
		_, err := fmt.Fprintln(out, usage)
		return err
	}
	if cmd != "nodes" && cmd != "why" && cmd != "report" {
		return fmt.Errorf("unknown or missing command\n%s", usage)
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is the usage
	cluster := clusterFlags{timeout: requestTimeout(30 * time.Second)}
	cluster.register(fs)
	// Each command takes only its own flags: another's would be ignored.
	var node, namespace, outFile *string
	switch cmd {
	case "nodes":
		node = fs.String("node", "", "only this node")
	case "why":
		namespace = fs.String("n", "", "the pod's namespace (default: the context's)")
		fs.StringVar(namespace, "namespace", "", "the pod's namespace (as -n)")
	case "report":
		outFile = fs.String("out", "", "write the HTML page to this file (default: stdout)")
	}
	positional, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprintln(out, usage)
		return err
	}
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", cmd, err, usage)
	}
	if err := checkArgs(cmd, positional); err != nil {
		return err
	}
	client, clientConfig, host, err := cluster.connect()
	if err != nil {
		return err
	}
	switch cmd {
	case "why":
		ns := *namespace
		if ns == "" {
			if ns, _, err = clientConfig.Namespace(); err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
		}
		return withRoleHint(inspect.Why(ctx, client, ns, positional[0], out))
	case "report":
		return withRoleHint(writeReport(ctx, client, host, *outFile, out))
	}
	return withRoleHint(inspect.Nodes(ctx, client, *node, out, os.Stderr))
}

// withRoleHint says where the permissions come from when the API server
// refused a read.
func withRoleHint(err error) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%w\nkubectl gputopo reads slices, claims, pods, pod groups and DeviceTaintRules: the gputopo-viewer ClusterRole of manifests/kubectl grants that; bind it to your user or group (docs/kubectl.md)", err)
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" }

// clusterFlags are the flags that say how to reach the cluster, as
// kubectl's: every command takes them.
type clusterFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
	timeout    requestTimeout
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&c.overrides.CurrentContext, "context", "", "kubeconfig context (default: the current one)")
	fs.Var(&c.timeout, "request-timeout", "how long one API request may take (30s, 1m; a plain number is seconds, as kubectl's)")
	fs.StringVar(&c.overrides.AuthInfo.Impersonate, "as", "", "user to impersonate")
	fs.Func("as-group", "group to impersonate (repeatable; needs --as)", func(v string) error {
		c.overrides.AuthInfo.ImpersonateGroups = append(c.overrides.AuthInfo.ImpersonateGroups, v)
		return nil
	})
	fs.StringVar(&c.overrides.AuthInfo.ImpersonateUID, "as-uid", "", "UID to impersonate (needs --as)")
}

// connect makes the client the flags describe, with the kubeconfig (for
// its namespace) and the API server's address.
func (c *clusterFlags) connect() (kubernetes.Interface, clientcmd.ClientConfig, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	clientConfig := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &c.overrides)
	cfg, err := clientConfig.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = time.Duration(c.timeout)
	// As kubectl: the API server's warnings (deprecated APIs) as plain
	// "Warning:" lines on stderr, each once.
	cfg.WarningHandler = restclient.NewWarningWriter(os.Stderr, restclient.WarningWriterOptions{Deduplicate: true})
	client, err := kubernetes.NewForConfig(cfg)
	return client, clientConfig, cfg.Host, err
}

// splitCommand finds the command among the arguments, after any flags
// (kubectl's "kubectl gputopo --context prod nodes"), and returns it with
// the other arguments, those flags first; "" and all the arguments when
// there is none. Every flag but -h and --help takes a value, as its next
// argument unless written --flag=value.
func splitCommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			return a, append(slices.Clip(args[:i]), args[i+1:]...)
		}
		if a == "--" {
			break
		}
		if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && name != "h" && name != "help" {
			i++ // its value
		}
	}
	return "", args
}

// requestTimeout reads --request-timeout as kubectl does: a duration, or
// a plain number of seconds.
type requestTimeout time.Duration

func (t *requestTimeout) String() string { return time.Duration(*t).String() }

func (t *requestTimeout) Set(v string) error {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		*t = requestTimeout(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration (30s, 1m) or a number of seconds")
	}
	*t = requestTimeout(d)
	return nil
}

// parseInterleaved parses flags before, between and after the positional
// arguments (kubectl's convention: "why POD -n NS" and "why -n NS POD"
// alike) and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := valuesPresent(fs, args); err != nil {
		return nil, err
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// valuesPresent refuses a flag written without its value: "--node
// --context=prod" would otherwise look for a node named
// "--context=prod", with the context quietly the default one. Every flag
// takes a value; one given as --flag=value may start with "-".
func valuesPresent(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		name := strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") || a == "-" || strings.Contains(name, "=") || fs.Lookup(name) == nil {
			continue
		}
		if i+1 < len(args) && strings.HasPrefix(args[i+1], "-") && args[i+1] != "-" {
			return fmt.Errorf("flag %s: missing value (%q is a flag; write %s=VALUE for a value that starts with -)", a, args[i+1], a)
		}
		i++ // its value
	}
	return nil
}

// checkArgs: why takes one pod, the others nothing; a stray word is an
// error, not ignored (it may be a misplaced flag's value).
func checkArgs(cmd string, positional []string) error {
	want := 0
	if cmd == "why" {
		want = 1
		if len(positional) == 0 {
			return fmt.Errorf("why: name the pod\n%s", usage)
		}
	}
	if len(positional) > want {
		return fmt.Errorf("%s: unexpected argument %q\n%s", cmd, positional[want], usage)
	}
	return nil
}

// writeReport writes the live cluster's HTML report to file, or to out
// when file is empty; a file is written whole or not at all.
func writeReport(ctx context.Context, client kubernetes.Interface, server, file string, out io.Writer) error {
	// A file that cannot be written is said before the cluster is read:
	// on a large cluster that read takes a while.
	if file != "" {
		if info, err := os.Stat(filepath.Dir(file)); err != nil {
			return fmt.Errorf("--out %s: %w", file, err)
		} else if !info.IsDir() {
			return fmt.Errorf("--out %s: %s is not a directory", file, filepath.Dir(file))
		}
		if info, err := os.Stat(file); err == nil && info.IsDir() {
			return fmt.Errorf("--out %s: is a directory; name the report's file", file)
		}
	}
	var page strings.Builder
	if err := inspect.WriteLiveReport(ctx, client, "GPUs of the cluster at "+server, time.Now(), &page, os.Stderr); err != nil {
		return err
	}
	if file == "" {
		_, err := io.WriteString(out, page.String())
		return err
	}
	if err := os.WriteFile(file, []byte(page.String()), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	_, err := fmt.Fprintf(out, "wrote %s\n", file)
	return err
}

// printVersion prints the plugin's version for "version", "--version" or
// "-version" as the first argument (with the build information for
// --version=raw), and reports whether it did.
func printVersion(args []string, out io.Writer) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	req := version.RequestLine
	v, ok := strings.CutPrefix(args[0], "--version=")
	if !ok {
		v, ok = strings.CutPrefix(args[0], "-version=")
	}
	if ok {
		r, err := version.ParseRequest(v)
		if err != nil {
			return false, fmt.Errorf("--version=%w", err)
		}
		req = r
	} else if args[0] != "version" && args[0] != "--version" && args[0] != "-version" {
		return false, nil
	}
	return req.Print(out, "kubectl-gputopo")
}
