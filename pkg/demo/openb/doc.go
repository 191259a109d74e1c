// Package openb reads the openb production GPU trace (Alibaba
// cluster-trace-gpu-v2023, published with Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent", USENIX ATC 2023) and reproduces the measurement
// methodology of the paper's artifact: inflate the pod list to 1.3x the
// cluster's GPU capacity, schedule pods one by one without deletions, and
// read "unallocated GPU %" against "arrived workload".
//
// It is pure Go on purpose: the demo and benchmarks that replay the trace
// through the scheduler import it, and the trace itself has nothing to do
// with Kubernetes types.
//
// Cite the paper when reporting figures computed on this trace.
package openb
