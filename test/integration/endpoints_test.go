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
	c.startSchedulerWith(gputopoOnly, fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--cert-dir="+t.TempDir(),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")
	c.create(podWithTemplate("default", "p", "two", "gputopo-scheduler"))
	c.waitScheduled("default", "p")

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (int, string) {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		var code int
		c.waitFor(path, 30*time.Second, func() (bool, error) {
			code, _ = get(path)
			return code == http.StatusOK, nil
		})
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, m := range []string{`gputopo_allocation_duration_seconds_count{result="allocated"}`, `gputopo_allocated_link_class_total{class="nvlink"} 1`, "scheduler_schedule_attempts_total"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}
