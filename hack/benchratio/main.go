// Command benchratio reads `go test -bench BenchmarkFilterAllNodes` output
// and prints, per workload, the engine's time and allocations next to
// upstream's, as ratios (upstream / gputopo: above 1 means gputopo is
// faster).
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var line = regexp.MustCompile(`^BenchmarkFilterAllNodes/(.+)/impl=([a-z-]+)(-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op\s+([\d.]+) allocs/op)?`)

type result struct{ ns, allocs float64 }

func main() {
	byWorkload := map[string]map[string]result{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		ns, _ := strconv.ParseFloat(m[4], 64)
		allocs, _ := strconv.ParseFloat(m[6], 64)
		if byWorkload[m[1]] == nil {
			byWorkload[m[1]] = map[string]result{}
		}
		byWorkload[m[1]][m[2]] = result{ns, allocs}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var names []string
	for n := range byWorkload {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%-32s %14s %14s %8s %8s %14s %8s %14s %8s %14s %8s\n", "workload", "upstream ns", "gputopo ns", "speedup", "allocs", "firstfit ns", "speedup", "memo ns", "speedup", "refresh ns", "speedup")
	for _, n := range names {
		r := byWorkload[n]
		up, ok1 := r["upstream"]
		ours, ok2 := r["gputopo"]
		if !ok1 || !ok2 {
			continue
		}
		ff, memo, refresh := r["gputopo-firstfit"], r["gputopo-memo"], r["gputopo-refresh"]
		fmt.Printf("%-32s %14.0f %14.0f %7.2fx %7.2fx %14.0f %7.2fx %14.0f %7.2fx %14.0f %7.2fx\n", n, up.ns, ours.ns, up.ns/ours.ns, up.allocs/max(ours.allocs, 1), ff.ns, up.ns/max(ff.ns, 1), memo.ns, up.ns/max(memo.ns, 1), refresh.ns, up.ns/max(refresh.ns, 1))
	}
}
