// Package topology models how GPUs on a node (and across nodes of one
// multi-node NVLink domain) talk to each other, and scores device sets and
// free-capacity layouts for the allocation engine.
//
// It reads only published device attributes (see docs/attributes.md): an
// explicit NVLink domain when the node agent publishes one, otherwise an
// NVSwitch fabric inferred from the product name (SXM A100/H100/H200/B200 and
// GB200 boards put every GPU of a node on NVSwitch), otherwise the standard
// PCIe root and NUMA attributes. It depends on k8s.io/api and
// k8s.io/dynamic-resource-allocation (for the standard attribute names)
// only, never k8s.io/kubernetes.
package topology
