package openb

// PublishedPolicies lists the artifact's policies in the README's column
// order (best first on the default trace).
var PublishedPolicies = []string{"FGD", "BestFit", "GpuPacking", "GpuClustering", "DotProd", "Random"}

// PublishedTraces are the traces with published figures, in the
// README's row order.
var PublishedTraces = []string{"default", "gpushare40", "gpushare80", "gpushare100", "multigpu50", "gpuspec33", "cpu250"}

// Published holds the published unallocated GPU % at arrived = 100% (lower
// is better; mean over 10 seeds), trace -> policy -> value, from the
// artifact's experiments/analysis/expected_results/analysis_allo_discrete.csv
// as quoted in the trace's README. Compare a run against these only when it
// follows the same methodology (Inflate with DefaultInflation, no deletions).
var Published = map[string]map[string]float64{
	"default":     {"FGD": 4.77, "BestFit": 7.14, "GpuPacking": 8.22, "GpuClustering": 8.35, "DotProd": 9.38, "Random": 13.70},
	"gpushare40":  {"FGD": 6.04, "BestFit": 8.56, "GpuPacking": 10.23, "GpuClustering": 10.24, "DotProd": 10.70, "Random": 15.14},
	"gpushare80":  {"FGD": 10.92, "BestFit": 13.34, "GpuPacking": 15.35, "GpuClustering": 15.50, "DotProd": 15.86, "Random": 19.38},
	"gpushare100": {"FGD": 13.36, "BestFit": 15.38, "GpuPacking": 17.87, "GpuClustering": 17.78, "DotProd": 18.02, "Random": 21.10},
	"multigpu50":  {"FGD": 2.91, "BestFit": 4.38, "GpuPacking": 3.94, "GpuClustering": 4.31, "DotProd": 5.27, "Random": 18.72},
	"gpuspec33":   {"FGD": 12.16, "BestFit": 19.61, "GpuPacking": 17.78, "GpuClustering": 18.91, "DotProd": 20.18, "Random": 16.13},
	"cpu250":      {"FGD": 6.80, "BestFit": 8.79, "GpuPacking": 11.95, "GpuClustering": 12.25, "DotProd": 16.43, "Random": 20.00},
}
