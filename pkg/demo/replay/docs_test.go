package replay_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/pkg/demo/fleet"
	"github.com/gputopo/gputopo/pkg/demo/replay"
)

// docsExample is the YAML block that follows the line naming flag in
// docs/demo.md ("Bring your own").
func docsExample(t *testing.T, flag string) []byte {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/demo.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "`"+flag+"`:\n\n```yaml\n")
	if !ok {
		t.Fatalf("docs/demo.md has no example of %s", flag)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("docs/demo.md: the example of %s does not end", flag)
	}
	return []byte(block)
}

// The files docs/demo.md shows for --cluster and --workload load as
// they are.
func TestDocsExamplesLoad(t *testing.T) {
	if _, err := fleet.ParseCluster(docsExample(t, "--cluster=fleet.yaml"), "docs/demo.md --cluster"); err != nil {
		t.Error(err)
	}
	if _, err := replay.ParseWorkload(docsExample(t, "--workload=workload.yaml"), "docs/demo.md --workload"); err != nil {
		t.Error(err)
	}
}
