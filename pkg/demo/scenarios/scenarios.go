// Package scenarios holds the demo's built-in cluster and workload
// files (the format is documented in docs/demo.md).
package scenarios

import _ "embed"

// DefaultCluster is, per scheduler, a DGX H100, two PCIe servers of NVLink
// pairs, an A100 node in MIG mode, two GB200 NVL72 trays of one rack and
// an H200 node shared by memory: 48 GPUs.
//
//go:embed default-cluster.yaml
var DefaultCluster []byte

// DefaultWorkload is the DRA article's two claims, tensor-parallel jobs of
// 2, 4 and 8 GPUs arriving and leaving, a stream of MIG profiles and
// shared-GPU inference pods, more than the fleet holds at the peak.
//
//go:embed default-workload.yaml
var DefaultWorkload []byte

// NVL72Cluster is two GB200 NVL72 racks per scheduler.
//
//go:embed nvl72-cluster.yaml
var NVL72Cluster []byte

// NVL72Workload is training jobs as pod groups, each in one NVLink
// clique, arriving and leaving (--scenario=nvl72).
//
//go:embed nvl72-workload.yaml
var NVL72Workload []byte
