package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The scheduler serves kube-scheduler's health and metrics endpoints,
// with gputopo's metrics among them.
func TestHealthAndMetricsEndpoints(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	c.node("node-0", nil)
	c.create(nvswitchNode("node-0"), gpuTemplate("default", "two", "gpu.nvidia.com", 2))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// /metrics is authorized by the API server (delegated TokenReview and
	// SubjectAccessReview, under the scheduler's own ServiceAccount), as
	// Prometheus scrapes it in a cluster; the health endpoints are open.
	kubeconfig := c.schedulerKubeconfig(gputopoOnly)
	c.runScheduler("gputopo", schedulerConfig(t, gputopoOnly, kubeconfig), fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--cert-dir="+t.TempDir(),
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
	token := c.metricsReaderToken()
	stranger := c.serviceAccountToken("default", "stranger")
	c.create(podWithTemplate("default", "p", "two", "gputopo-scheduler"))
	c.waitScheduled("default", "p")

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	getAs := func(path, bearer string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
		if err != nil {
			return 0, err.Error()
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	get := func(path string) (int, string) { return getAs(path, token) }
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		c.waitFor(path, 30*time.Second, func() (bool, error) {
			var code int
			code, _ = get(path)
			return code == http.StatusOK, nil
		})
	}
	var (
		code int
		body string
	)
	c.waitFor("/metrics", 30*time.Second, func() (bool, error) {
		code, body = get("/metrics")
		return code == http.StatusOK, nil
	})
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for who, bearer := range map[string]string{"anonymous": "", "a service account without the role": stranger} {
		if code, body := getAs("/metrics", bearer); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("/metrics as %s: %d %.200s, want it refused", who, code, body)
		}
	}
	// client-go and build metrics come from the imports cmd/kube-scheduler
	// has too.
	// The fleet gauges read the scheduler's state at scrape time: the
	// pod holds 2 of node-0's 8 NVSwitch GPUs, which strands the other 6
	// (its one NVLink domain is no longer whole).
	for _, m := range []string{`gputopo_allocation_duration_seconds_count{result="allocated"}`, `gputopo_allocated_link_class_total{class="nvlink"} 1`, "scheduler_schedule_attempts_total",
		"rest_client_requests_total", "kubernetes_build_info",
		`gputopo_fleet_gpus{state="used"} 2`, `gputopo_fleet_gpus{state="free"} 6`, `gputopo_fleet_gpus{state="partial"} 0`, `gputopo_fleet_tainted_gpus{state="free"} 0`,
		"gputopo_fleet_stranded_gpus 6", `gputopo_fleet_nvlink_domains{state="total"} 1`, `gputopo_fleet_nvlink_domains{state="free"} 0`,
		`gputopo_fleet_cliques{state="total"} 0`, "gputopo_fleet_scrape_errors_total 0"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// metricsReaderToken is a token of a service account allowed to read
// /metrics, as a monitoring system has.
func (c *cluster) metricsReaderToken() string {
	c.t.Helper()
	const ns, name = "default", "metrics-reader"
	token := c.serviceAccountToken(ns, name)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := c.client.RbacV1().ClusterRoles().Create(c.ctx, role, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.client.RbacV1().ClusterRoleBindings().Create(c.ctx, binding, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return token
}

// serviceAccountToken creates a service account and returns a token of it.
func (c *cluster) serviceAccountToken(ns, name string) string {
	c.t.Helper()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(c.ctx, sa, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	tr, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(c.ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return tr.Status.Token
}
