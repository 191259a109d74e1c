package openb

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPublished(t *testing.T) {
	tests := []struct {
		trace, policy string
		want          float64
	}{
		{"default", "FGD", 4.77},
		{"default", "BestFit", 7.14},
		{"default", "Random", 13.70},
		{"multigpu50", "GpuPacking", 3.94},
		{"gpuspec33", "Random", 16.13},
		{"cpu250", "DotProd", 16.43},
	}
	for _, tc := range tests {
		if got, ok := Published[tc.trace][tc.policy]; !ok || got != tc.want {
			t.Errorf("Published[%q][%q] = %v, %v; want %v", tc.trace, tc.policy, got, ok, tc.want)
		}
	}
	if len(PublishedTraces) != len(Published) {
		t.Errorf("PublishedTraces has %d traces, Published %d", len(PublishedTraces), len(Published))
	}
	for _, trace := range PublishedTraces {
		if _, ok := Published[trace]; !ok {
			t.Errorf("PublishedTraces names %s, which has no figures", trace)
		}
	}
	for trace, row := range Published {
		if len(row) != len(PublishedPolicies) {
			t.Errorf("%s has %d policies, want %d", trace, len(row), len(PublishedPolicies))
		}
		for _, p := range PublishedPolicies {
			if _, ok := row[p]; !ok {
				t.Errorf("%s lacks %s", trace, p)
			}
		}
	}
}

// TestPublishedMatchesReadme parses the shipped trace's README table so
// that a typo in either place shows up.
func TestPublishedMatchesReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("data", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	rows := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|--") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "trace" {
			header = cells[1:]
			continue
		}
		rows++
		for i, c := range cells[1:] {
			v, err := strconv.ParseFloat(c, 64)
			if err != nil {
				t.Fatalf("README cell %q: %v", c, err)
			}
			if got := Published[cells[0]][header[i]]; got != v {
				t.Errorf("Published[%q][%q] = %v, README says %v", cells[0], header[i], got, v)
			}
		}
	}
	if rows != len(Published) || !slices.Equal(header, PublishedPolicies) {
		t.Errorf("README has %d rows and policies %v; Published has %d and %v", rows, header, len(Published), PublishedPolicies)
	}
}
