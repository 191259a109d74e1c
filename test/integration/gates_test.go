package integration

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

// klogTextLine is a line in klog's text format (I1201 10:00:00.000000 ...).
var klogTextLine = regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d`)

// The scheduler's feature gates reach gputopo's profile as they reach the
// in-tree plugin: GPUs with a NoSchedule device taint are refused by both
// profiles while DRADeviceTaints is on (1.37's default) and allocated by
// both once the scheduler runs with DRADeviceTaints off (and
// DRADeviceTaintRules, which depends on it),
// same pods, same API server state. The second run also logs with
// --logging-format=json, which upstream's kube-scheduler registers.
func TestFeatureGatesAndJSONLogging(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	const ns = "default"
	c.create(gpuTemplate(ns, "one", "gpu.nvidia.com", 1))
	profiles := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who, sched := range profiles {
		node := who + "-0"
		c.node(node, nil)
		s := pairNode(node)
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].Taints = []resourceapi.DeviceTaint{{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		c.create(s, podOn(ns, "p-"+who, "one", sched, node))
	}

	kubeconfig := c.schedulerKubeconfig(bothProfiles)
	first := c.runScheduler("gates-default", schedulerConfig(t, bothProfiles, kubeconfig))
	for who := range profiles {
		c.waitFor("p-"+who+" unschedulable", 60*time.Second, func() (bool, error) {
			return strings.Contains(c.schedulingMessage(ns, "p-"+who), "cannot allocate all claims"), nil
		})
	}
	first.stop(syscall.SIGTERM)

	second := c.runScheduler("gates-off", schedulerConfig(t, bothProfiles, kubeconfig),
		"--feature-gates=DRADeviceTaints=false,DRADeviceTaintRules=false", "--logging-format=json")
	c.waitScheduled(ns, "p-gputopo", "p-intree")
	devices := c.devicesByPod(ns)
	for who := range profiles {
		if got := devices["p-"+who]; len(got) != 1 || !strings.HasPrefix(got[0], who+"-0/") {
			t.Errorf("%s: devices %v, want one tainted GPU of %s-0", who, got, who)
		}
	}
	c.checkNoDoubleBooking()
	checkJSONLog(t, second.log)
}

// checkJSONLog: once logging is set up, every line is a JSON object with
// upstream's keys (ts, msg; v on info lines); none is in klog's text
// format.
func checkJSONLog(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var jsonLines, textLines int
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "{") {
			if jsonLines > 0 && klogTextLine.MatchString(line) {
				textLines++
			}
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not JSON: %v: %s", err, line)
			continue
		}
		for _, key := range []string{"ts", "msg"} {
			if _, ok := entry[key]; !ok {
				t.Errorf("JSON log line without %q: %s", key, line)
			}
		}
		jsonLines++
	}
	if jsonLines == 0 || textLines > 0 {
		t.Errorf("--logging-format=json: %d JSON lines, %d klog text lines after the first JSON line", jsonLines, textLines)
	}
}
