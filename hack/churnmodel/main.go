// Command churnmodel tells how much node placement alone can change the
// jobs served on the churn benchmark's whole-GPU streams: it replays each
// stream's arrivals (the same jobs as `go run ./cmd/demo --scenario=churn`)
// on a counting model of its fleet, where a job takes as many GPUs of one
// node as it asks for and nothing else counts, under several node rules,
// and prints per stream and rule the jobs served, in total and before the
// first rejection, each paired seed by seed with first fit (docs/demo.md).
//
//	go run ./hack/churnmodel [-seeds=400]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/gputopo/gputopo/pkg/demo/sim"
)

func main() {
	seeds := flag.Int("seeds", 400, "seeds per stream, from 1")
	flag.Parse()
	if *seeds < 2 {
		fmt.Fprintln(os.Stderr, "churnmodel: -seeds must be at least 2")
		os.Exit(2)
	}
	fmt.Println("| stream | node rule | jobs served, mean | more than first fit, per seed (mean ± s.e.) | seeds with at least as many | served before the first rejection, mean | more than first fit | seeds with at least as many |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, st := range sim.ChurnStreams {
		w, err := st.Workload()
		if err != nil {
			continue // not whole GPUs: MIG profiles or shares
		}
		m, err := st.Model()
		if err != nil {
			fmt.Fprintln(os.Stderr, "churnmodel:", err)
			os.Exit(1)
		}
		rules := []struct {
			name string
			rule sim.NodeRule
		}{
			{"first fit", sim.FirstFit},
			{"best fit", sim.BestFit},
			{"worst fit", sim.WorstFit},
			{"fragmentation (FGD)", sim.FragmentationRule(w, false)},
			{"fragmentation, best-fit ties", sim.FragmentationRule(w, true)},
		}
		served, before := make([][]int, len(rules)), make([][]int, len(rules))
		for r, rule := range rules {
			for seed := 1; seed <= *seeds; seed++ {
				run := m.Served(uint64(seed), rule.rule)
				served[r] = append(served[r], run.Served)
				before[r] = append(before[r], run.BeforeRejection)
			}
		}
		for r, rule := range rules {
			mean, se, atLeast := paired(served[r], served[0])
			bMean, bSE, bAtLeast := paired(before[r], before[0])
			fmt.Printf("| %s | %s | %.1f | %+.2f ± %.2f | %d of %d | %.1f | %+.2f ± %.2f | %d of %d |\n",
				st.Name, rule.name, average(served[r]), mean, se, atLeast, *seeds,
				average(before[r]), bMean, bSE, bAtLeast, *seeds)
		}
	}
}

// paired is the mean difference a-b with its standard error, and on how
// many seeds a is at least b.
func paired(a, b []int) (mean, se float64, atLeast int) {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = float64(a[i] - b[i])
		if a[i] >= b[i] {
			atLeast++
		}
	}
	mean = average(d)
	var ss float64
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(d)-1)) / math.Sqrt(float64(len(d))), atLeast
}

func average[T int | float64](v []T) float64 {
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}
