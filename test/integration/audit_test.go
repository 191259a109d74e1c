package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The API server of every test writes an audit log of the requests made
// by gputopo's service accounts. Each test fails on a request that RBAC
// denied; at the end of the suite TestMain checks that every rule of the
// shipped roles was used, except those with a reason below.

// viewerUser is the ServiceAccount of manifests/kubectl (kubectl gputopo).
const viewerUser = "system:serviceaccount:gputopo-system:gputopo-viewer"

// productUsers are the identities the manifests give gputopo's parts.
var productUsers = map[string]string{
	schedulerUser: "scheduler",
	agentUser:     "nodeagent",
	viewerUser:    "viewer",
}

// probeUserAgent marks requests a test makes with a product identity to
// show that they are refused; they are not the product's requests.
const probeUserAgent = "gputopo-test-probe"

// auditPolicy records metadata of product requests only.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [` + schedulerUser + `, ` + agentUser + `, ` + viewerUser + `]
- level: None
`

// auditLog is one API server's audit log.
type auditLog struct {
	t    *testing.T
	path string
}

func newAuditLog(t *testing.T) *auditLog {
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	return &auditLog{t: t, path: filepath.Join(dir, "audit.log")}
}

func (a *auditLog) flags() []string {
	return []string{
		"--audit-policy-file=" + filepath.Join(filepath.Dir(a.path), "audit-policy.yaml"),
		"--audit-log-path=" + a.path,
		"--audit-log-mode=blocking",
		"--audit-log-format=json",
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event we read.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct{ Username string }
	ObjectRef  *struct {
		Resource, Namespace, Name, APIGroup, Subresource string
	} `json:"objectRef"`
	ResponseStatus *struct{ Code int } `json:"responseStatus"`
	Annotations    map[string]string   `json:"annotations"`
}

// request is what RBAC decides on: who, group, resource[/sub], verb, name.
type request struct {
	who, group, resource, verb, name string
}

func (r request) String() string {
	s := fmt.Sprintf("%s %s %s", r.who, r.verb, r.resource)
	if r.group != "" {
		s += "." + r.group
	}
	if r.name != "" {
		s += " " + r.name
	}
	return s
}

// usedRequests collects every allowed product request of the suite.
var usedRequests = struct {
	sync.Mutex
	set map[request]int
}{set: map[request]int{}}

// collect reads the log: a request RBAC denied fails the test; allowed
// ones are counted for the coverage check.
func (a *auditLog) collect() {
	f, err := os.Open(a.path)
	if err != nil {
		if !os.IsNotExist(err) {
			a.t.Errorf("audit log: %v", err)
		}
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	usedRequests.Lock()
	defer usedRequests.Unlock()
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			a.t.Errorf("audit log line: %v", err)
			continue
		}
		r, ok := e.request()
		if !ok || e.UserAgent == probeUserAgent {
			continue
		}
		if e.Annotations["authorization.k8s.io/decision"] == "forbid" {
			a.t.Errorf("RBAC denied a request of the %s: %s (%s)", r.who, r, e.RequestURI)
			continue
		}
		usedRequests.set[r]++
		// An informer lists by a watch that sends the initial state
		// (WatchList); client-go falls back to a plain list where the API
		// server does not serve that, so it uses the list grant too.
		if r.verb == "watch" && strings.Contains(e.RequestURI, "sendInitialEvents=true") {
			r.verb = "list"
			usedRequests.set[r]++
		}
	}
	if err := sc.Err(); err != nil {
		a.t.Errorf("audit log: %v", err)
	}
}

// request maps an event of a product identity to what RBAC checks.
func (e *auditEvent) request() (request, bool) {
	// Only a product identity's own credentials count: product code runs
	// with its service account's token (agentConfig,
	// serviceAccountKubeconfig), never impersonated; the one impersonated
	// process, the cluster's kube-scheduler of TestSecondSchedulerPartition,
	// is no product identity.
	who, ok := productUsers[e.User.Username]
	if !ok || e.ObjectRef == nil {
		return request{}, false
	}
	res := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		res += "/" + e.ObjectRef.Subresource
	}
	return request{who: who, group: e.ObjectRef.APIGroup, resource: res, verb: e.Verb, name: e.ObjectRef.Name}, true
}

// unusedAllowed lists grants no test exercises, each with the reason it
// is in the role. A test that starts using one fails the suite until it
// is removed from here.
var unusedAllowed = map[string]string{
	"scheduler create bindings":               "upstream's system:kube-scheduler grants the legacy bindings resource next to pods/binding; client-go binds through pods/binding",
	"scheduler update persistentvolumeclaims": "dynamic provisioning with WaitForFirstConsumer: the scheduler writes the selected node on the claim (system:volume-scheduler); the suite binds a pre-created local volume, which updates the PV",
}

// sometimesUsed lists grants whose use in a run depends on timing, each
// with the reason it is in the role: neither a use nor its absence fails
// the suite.
var sometimesUsed = map[string]string{
	"scheduler patch events":                       "the core/v1 events API (leader election's recorder): a repeated event is patched",
	"scheduler update events":                      "the core/v1 events API (leader election's recorder), when it aggregates events",
	"scheduler update events.events.k8s.io":        "the recorder updates an event only when it aggregates series",
	"scheduler patch events.events.k8s.io":         "the recorder patches an event series when the same event repeats within minutes",
	"scheduler get resourceclaims.resource.k8s.io": "PreBind reads a claim back after a write conflict (bindClaim), and the default profile reads DRA extended-resource claims",
}

// roleRules reads the ClusterRoles and Roles of a manifest.
func roleRules(path string) ([]rbacv1.PolicyRule, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rules []rbacv1.PolicyRule
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	for {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if obj.Kind == "ClusterRole" || obj.Kind == "Role" {
			rules = append(rules, obj.Rules...)
		}
	}
	return rules, nil
}

// grant is one group/resource/verb of a rule.
func grants(who string, rules []rbacv1.PolicyRule) []request {
	var out []request
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, request{who: who, group: g, resource: res, verb: v, name: strings.Join(r.ResourceNames, ",")})
				}
			}
		}
	}
	return out
}

// covers reports whether a request used a grant. Writing a claim's
// allocation or reservedFor through resourceclaims/status is also
// authorized against resourceclaims/binding (granular status
// authorization), which the audit log does not show as a request of its
// own.
func covers(g, r request) bool {
	if g.who != r.who || g.group != r.group || g.verb != r.verb {
		return false
	}
	if g.name != "" && !slices.Contains(strings.Split(g.name, ","), r.name) {
		return false
	}
	return g.resource == r.resource || g.resource == "resourceclaims/binding" && r.resource == "resourceclaims/status"
}

// checkRBACCoverage returns the shipped grants no request of the suite
// used and unusedAllowed does not explain, and those unusedAllowed
// explains though the suite used them (stale entries, which would hide
// the day a test stops using them).
func checkRBACCoverage() (unused, stale []string, err error) {
	var all []request
	for _, role := range []struct{ who, path string }{
		{"scheduler", "../../manifests/scheduler/base/rbac.yaml"},
		{"scheduler", "../../manifests/scheduler/leader-election.yaml"},
		{"scheduler", "../../manifests/scheduler/second-scheduler/leader-election.yaml"},
		{"nodeagent", "../../manifests/nodeagent/rbac.yaml"},
		{"nodeagent", "../../manifests/nodeagent-clique-label/rbac.yaml"},
		{"viewer", "../../manifests/kubectl/rbac.yaml"},
	} {
		rules, err := roleRules(role.path)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, grants(role.who, rules)...)
	}
	usedRequests.Lock()
	defer usedRequests.Unlock()
	for _, g := range all {
		used := false
		for r := range usedRequests.set {
			if covers(g, r) {
				used = true
				break
			}
		}
		key := request{who: g.who, group: g.group, resource: g.resource, verb: g.verb}.String()
		if sometimesUsed[key] != "" {
			continue
		}
		switch explained := unusedAllowed[key] != ""; {
		case !used && !explained:
			unused = append(unused, key)
		case used && explained:
			stale = append(stale, key)
		}
	}
	sort.Strings(unused)
	sort.Strings(stale)
	return unused, stale, nil
}
