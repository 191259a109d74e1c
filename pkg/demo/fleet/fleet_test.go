package fleet

import (
	"strings"
	"testing"
)

// A fleet file is refused before any node is created, each mistake with
// its field.
func TestParseClusterNamesTheField(t *testing.T) {
	for _, tc := range []struct{ name, nodes, want string }{
		{"upper-case name", "- {name: DGX, count: 1, shape: dgxh100}", `nodes[0].name: Invalid value: "DGX"`},
		{"empty name", "- {count: 1, shape: dgxh100}", `nodes[0].name: Invalid value: ""`},
		{"name twice", "- {name: dgx, count: 1, shape: dgxh100}\n- {name: dgx, count: 2, shape: dgxa100}", `nodes[1].name: Duplicate value: "dgx"`},
		{"no nodes", "", "nodes: Required value"},
		{"count", "- {name: dgx, count: 0, shape: dgxh100}", "nodes[0].count: Invalid value: 0"},
		{"count too large", "- {name: dgx, count: 1000000000, shape: dgxh100}", "nodes[0].count: Invalid value: 1000000000: must be in 1..2000"},
		{"too many nodes in all", "- {name: dgx, count: 1500, shape: dgxh100}\n- {name: pairs, count: 1500, shape: pcie-pairs}", "nodes: Invalid value: 3000: 3000 nodes in all; at most 2000"},
		{"shape", "- {name: dgx, count: 1, shape: dgx9}", `nodes[0].shape: Unsupported value: "dgx9"`},
		{"mode", "- {name: dgx, count: 1, shape: dgxh100, mode: half}", `nodes[0].mode: Unsupported value: "half"`},
		{"negative cpu", `- {name: dgx, count: 1, shape: dgxh100, cpu: "-4"}`, `nodes[0].cpu: Invalid value: "-4": must not be negative`},
		{"negative memory", "- {name: dgx, count: 1, shape: dgxh100, memory: -1Gi}", `nodes[0].memory: Invalid value: "-1Gi"`},
		// Node names are <copy>-<name>-<i>, each also a label value.
		{"name too long with its copy and index", "- {name: " + strings.Repeat("a", 53) + ", count: 1000, shape: dgxh100}", "nodes[0].name: Too long: may not be more than 51 bytes"},
		{"memory that is no quantity", "- {name: dgx, count: 1, shape: dgxh100, memory: 2 TB}", `nodes[0].memory: Invalid value: "2 TB": quantities must match`},
		{"misspelt field", "- {name: dgx, count: 1, shape: dgxh100, cpus: 64}", `nodes[0]: unknown field "cpus"`},
		{"rack that is no label value", "- {name: tray, count: 2, shape: gb200-tray, rack: NVL72 rack A}", `nodes[0].rack: Invalid value: "NVL72 rack A": a valid label must be`},
		{"rack of a DGX", "- {name: dgx, count: 2, shape: dgxh100, rack: rack-a}", `nodes[0].rack: Invalid value: "rack-a": only gb200-tray`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCluster([]byte("nodes:\n"+tc.nodes+"\n"), "fleet.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "fleet.yaml: ") {
				t.Errorf("error %v, want one from fleet.yaml containing %q", err, tc.want)
			}
		})
	}
	ok := "nodes:\n- {name: dgx, count: 4, shape: dgxh100, mode: whole, cpu: \"128\", memory: 1Ti}\n- {name: tray, count: 2, shape: gb200-tray, rack: nvl72-a}\n"
	if _, err := ParseCluster([]byte(ok), "fleet.yaml"); err != nil {
		t.Errorf("valid fleet: %v", err)
	}
}
