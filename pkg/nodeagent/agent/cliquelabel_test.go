package agent

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

func TestLabelClique(t *testing.T) {
	gpus := func(cliques ...string) []discovery.GPU {
		var out []discovery.GPU
		for _, c := range cliques {
			out = append(out, discovery.GPU{CliqueID: c})
		}
		return out
	}
	tests := []struct {
		name      string
		old       map[string]string
		gpus      []discovery.GPU
		wantLabel string // "" for no label
		wantErr   string
	}{
		{name: "one clique", old: map[string]string{"a": "b"}, gpus: gpus("c.1", "c.1"), wantLabel: "c.1"},
		{name: "moved rack", old: map[string]string{contract.LabelClique: "c.0"}, gpus: gpus("c.1"), wantLabel: "c.1"},
		{name: "no clique", old: map[string]string{contract.LabelClique: "c.0"}, gpus: gpus("", "")},
		{name: "disagree", old: map[string]string{contract.LabelClique: "c.0"}, gpus: gpus("c.1", "c.2"), wantErr: "different NVLink cliques [c.1 c.2]"},
		{name: "some in none", gpus: gpus("c.1", ""), wantErr: "some in none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.old}})
			err := labelClique(context.Background(), client, "n", tc.gpus)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			node, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := node.Labels[contract.LabelClique]; got != tc.wantLabel {
				t.Errorf("label %q, want %q", got, tc.wantLabel)
			}
			if tc.old["a"] != "" && node.Labels["a"] != tc.old["a"] {
				t.Errorf("other label changed: %v", node.Labels)
			}
		})
	}
}
