package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/manifests"
	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/mocknvml"
)

// linkCostConfig is the shipped configuration with GPUTopology's
// linkClassCost set to cost ("" keeps the default) and workload as the
// expected request mix.
func linkCostConfig(t *testing.T, cost, workload string) string {
	t.Helper()
	var cm v1.ConfigMap
	if err := yaml.Unmarshal(manifests.SchedulerConfigMap, &cm); err != nil {
		t.Fatal(err)
	}
	text := cm.Data["scheduler-config.yaml"]
	const anchor = "      hostPressure: 0.2\n"
	if !strings.Contains(text, anchor) {
		t.Fatalf("shipped configuration has no %q", anchor)
	}
	extra := "      workload: " + workload + "\n"
	if cost != "" {
		extra += "      linkClassCost: " + cost + "\n"
	}
	return strings.Replace(text, anchor, anchor+extra, 1)
}

// Across nodes, linkClassCost decides between a fuller node whose two
// free GPUs sit on different sockets (4 link classes below the node's
// NVLink pairs) and an emptier one with free NVLink pairs. With 4-GPU
// jobs expected, the fuller node's 2 GPUs are stranded and taking them
// saves 2 GPUs of fragmentation; with 40% of them, 0.8. The default
// (0.25 per class, 1 for the 4 classes) gives the pair up only for the
// larger saving.
func TestLinkClassCostKeepsLinksAcrossNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const only4 = "[{gpus: 4, share: 1, weight: 1}]"
	const some4 = "[{gpus: 4, share: 1, weight: 0.4}, {gpus: 1, share: 1, weight: 0.6}]"
	tests := []struct {
		name, cost, workload, want string
	}{
		{name: "packing only", cost: "0", workload: only4, want: "full-0"},
		{name: "default, 2 GPUs saved", workload: only4, want: "full-0"},
		{name: "default, 0.8 GPUs saved", workload: some4, want: "roomy-0"},
		{name: "a class worth a GPU", cost: "1", workload: only4, want: "roomy-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := DecodeConfig([]byte(linkCostConfig(t, tc.cost, tc.workload)))
			if err != nil {
				t.Fatal(err)
			}
			client := NewClient()
			if err := fleet.CreateDeviceClasses(ctx, client); err != nil {
				t.Fatal(err)
			}
			st := Stream{Name: "two", Fleet: []fleet.NodeGroup{
				{Name: "full", Count: 1, Shape: mocknvml.PCIePairs, Mode: config.Whole},
				{Name: "roomy", Count: 1, Shape: mocknvml.PCIePairs, Mode: config.Whole},
			}, Kinds: wholeGPUs(2)}
			l, _, err := publishStream(ctx, client, st)
			if err != nil {
				t.Fatal(err)
			}
			// full-0 keeps one GPU of two pairs on different NUMA nodes;
			// roomy-0 loses one pair and keeps three.
			hold(ctx, t, client, l, "full-0", func(pair, numa int64, first bool) bool { return !first || (pair != 0 || numa != 0) && pair != 2 })
			hold(ctx, t, client, l, "roomy-0", func(pair, _ int64, _ bool) bool { return pair == 0 })
			s, err := New(ctx, cfg, client)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			pod, claims := churnObjects(targets[0], job{seq: 1}, st.Kinds[0])
			out, err := s.Schedule(ctx, pod, claims)
			if err != nil {
				t.Fatal(err)
			}
			if out.Node != tc.want {
				t.Errorf("2-GPU job went to %q (%s), want %s", out.Node, out.Reason, tc.want)
			}
		})
	}
}

// hold allocates, in one claim, the node's GPUs for which take is true,
// given the index of their NVLink pair among the node's pairs, their NUMA
// node and whether they are the first of their pair.
func hold(ctx context.Context, t *testing.T, client *Client, l *links, node string, take func(pair, numa int64, first bool) bool) {
	t.Helper()
	pairs := map[string]int64{}
	seen := map[string]bool{}
	alloc := &resourceapi.AllocationResult{}
	for _, key := range l.nodes[node] {
		g := l.gpu[key]
		if _, ok := pairs[g.NVLinkDomain]; !ok {
			pairs[g.NVLinkDomain] = int64(len(pairs))
		}
		first := !seen[g.NVLinkDomain]
		seen[g.NVLinkDomain] = true
		if !take(pairs[g.NVLinkDomain], g.NUMA, first) {
			continue
		}
		pool, device, _ := strings.Cut(key, "/")
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: contract.DefaultDriver, Pool: pool, Device: device})
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "held", Name: node},
		Status: resourceapi.ResourceClaimStatus{Allocation: alloc}}
	if _, err := client.ResourceV1().ResourceClaims("held").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d GPUs held", node, len(alloc.Devices.Results))
}
