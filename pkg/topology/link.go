package topology

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/gputopo/gputopo/pkg/contract"
)

// LinkClass ranks the path between two devices; lower is better.
type LinkClass int

const (
	// LinkSameGPU is the class of two partitions of one physical GPU.
	LinkSameGPU LinkClass = iota
	// LinkNVLink is the class of one NVLink domain on one node (NVSwitch fabric or
	// NVLink bridge).
	LinkNVLink
	// LinkPCIeSwitch is the class of GPUs under one PCIe switch.
	LinkPCIeSwitch
	// LinkPCIeHostBridge is the class of GPUs on one PCIe root complex.
	LinkPCIeHostBridge
	// LinkNUMA is the class of GPUs on one NUMA node, through the CPU's
	// interconnect.
	LinkNUMA
	// LinkSystem is the class across CPU sockets (SMP interconnect), or
	// unknown.
	LinkSystem
	// LinkMultiNodeNVLink is the class of different nodes in one multi-node
	// NVLink clique
	// (GB200 NVL72 rack).
	LinkMultiNodeNVLink
	// LinkNetwork is the class of different nodes without a shared NVLink
	// fabric.
	LinkNetwork
)

var linkClassNames = [...]string{"same-gpu", "nvlink", "pcie-switch", "pcie-host-bridge", "numa", "system", "mnnvl", "network"}

// LinkClasses lists every class, best first.
func LinkClasses() []LinkClass {
	return []LinkClass{LinkSameGPU, LinkNVLink, LinkPCIeSwitch, LinkPCIeHostBridge, LinkNUMA, LinkSystem, LinkMultiNodeNVLink, LinkNetwork}
}

func (c LinkClass) String() string {
	if c < 0 || int(c) >= len(linkClassNames) {
		return fmt.Sprintf("LinkClass(%d)", int(c))
	}
	return linkClassNames[c]
}

// GPU is what the link model knows about one device.
type GPU struct {
	// Node the device is attached to; empty for network-attached devices.
	Node string
	// Physical is the identity of the physical GPU (uuid, or parentUUID
	// for a MIG partition); empty when unknown.
	Physical string
	// Partition is true for a MIG partition or other sub-device.
	Partition bool
	// Type is the device's type attribute (gpu, mig), "" when it has none.
	Type string
	// NVLinkDomain groups GPUs of a node that reach each other over
	// NVLink. Empty when there is none.
	NVLinkDomain string
	// Inferred is true when NVLinkDomain was derived from the product name.
	Inferred   bool
	PCIeSwitch string
	PCIeRoot   string
	// NUMA is the NUMA node, -1 when unknown.
	NUMA int64
	// Clique is the multi-node NVLink clique, empty when none.
	Clique string
}

// HasTopology reports whether anything beyond the node is known.
func (g GPU) HasTopology() bool {
	return g.NVLinkDomain != "" || g.PCIeRoot != "" || g.PCIeSwitch != "" || g.NUMA >= 0 || g.Physical != ""
}

// WholeGPU reports whether the device is a whole GPU with topology, as
// the measures of free GPUs (intactness, fragmentation) count them: type
// gpu, or without a type a GPU's identity (uuid) or NVLink. Partitions
// and devices of another type are not, nor a device that publishes
// nothing but the standard PCIe root or NUMA node: another driver's NIC
// on the same node does so.
func (g GPU) WholeGPU() bool {
	if g.Partition || !g.HasTopology() {
		return false
	}
	switch g.Type {
	case contract.TypeGPU:
		return true
	case "":
		return g.Physical != "" || g.NVLinkDomain != ""
	}
	return false
}

// Describe extracts the link-model view of a device published by driver on
// node. Attributes are looked up in the driver's domain first, then as
// standard resource.kubernetes.io attributes.
func Describe(driver, node string, attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) GPU {
	g := GPU{Node: node, NUMA: -1}
	str := func(id string) string {
		if a, ok := lookup(attrs, driver, id); ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	typ := str(contract.AttrType)
	g.Type = typ
	g.Partition = typ == contract.TypeMIG
	if g.Partition {
		g.Physical = str(contract.AttrParentUUID)
	} else {
		g.Physical = str(contract.AttrUUID)
	}
	g.NVLinkDomain = str(contract.AttrNVLinkDomain)
	g.PCIeSwitch = str(contract.AttrPCIeSwitch)
	g.Clique = str(contract.AttrCliqueID)
	if a, ok := attrs[deviceattribute.StandardDeviceAttributePCIeRoot]; ok && a.StringValue != nil {
		g.PCIeRoot = *a.StringValue
	} else if v := str(contract.AttrPCIeRootInDriverDomain); v != "" {
		g.PCIeRoot = v
	}
	if a, ok := attrs[deviceattribute.StandardDeviceAttributeNUMANode]; ok && a.IntValue != nil {
		g.NUMA = *a.IntValue
	} else if a, ok := lookup(attrs, driver, contract.AttrNUMANodeInDriverDomain); ok && a.IntValue != nil {
		g.NUMA = *a.IntValue
	}
	if g.NVLinkDomain == "" && node != "" && OnNVSwitch(str(contract.AttrProductName)) {
		// All GPUs of an SXM board share the node's NVSwitch fabric.
		g.NVLinkDomain = "nvswitch"
		g.Inferred = true
	}
	return g
}

// DeviceNode is the node a device is on: its slice's, or with
// perDeviceNodeSelection its own nodeName; "" for a device several nodes
// reach (network-attached), which no node holds.
func DeviceNode(s *resourceapi.ResourceSlice, d *resourceapi.Device) string {
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		return *s.Spec.NodeName
	}
	if d.NodeName != nil {
		return *d.NodeName
	}
	return ""
}

// PhysicalKey names a physical GPU fleet-wide: its driver and node with
// the uuid (or parentUUID) it publishes, which only that driver on that
// node need keep unique. "" for a device that names none.
func PhysicalKey(driver, node, physical string) string {
	if physical == "" {
		return ""
	}
	return driver + "/" + node + "/" + physical
}

func lookup(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, driver, id string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := attrs[resourceapi.QualifiedName(id)]; ok {
		return a, true
	}
	a, ok := attrs[resourceapi.QualifiedName(driver+"/"+id)]
	return a, ok
}

// OnNVSwitch reports whether a product is an SXM-style part whose boards
// connect every GPU through NVSwitch: A100/H100/H200 SXM, B200, GB200 and
// later. PCIe cards ("PCIe", "NVL" bridged pairs) are not; a Grace
// Blackwell superchip is, whatever follows its name (NVIDIA's own mock
// NVML calls the GB200 "NVIDIA GB200 NVL", after the NVL72 rack).
func OnNVSwitch(product string) bool {
	p := strings.ToUpper(product)
	switch {
	case p == "":
		return false
	case strings.Contains(p, "GB200"), strings.Contains(p, "GB300"):
		return true
	case strings.Contains(p, "PCIE"), strings.Contains(p, " NVL"), strings.HasSuffix(p, "NVL"):
		return false
	case strings.Contains(p, "SXM"), strings.Contains(p, "HBM3"):
		return true
	case strings.Contains(p, "H200"), strings.Contains(p, "B200"), strings.Contains(p, "B300"):
		return true
	}
	return false
}

// Pair returns the link class between two devices.
func Pair(a, b GPU) LinkClass {
	if a.Node != b.Node || a.Node == "" {
		if a.Clique != "" && a.Clique == b.Clique {
			return LinkMultiNodeNVLink
		}
		return LinkNetwork
	}
	switch {
	case a.Physical != "" && a.Physical == b.Physical:
		return LinkSameGPU
	case a.NVLinkDomain != "" && a.NVLinkDomain == b.NVLinkDomain:
		return LinkNVLink
	case a.PCIeSwitch != "" && a.PCIeSwitch == b.PCIeSwitch:
		return LinkPCIeSwitch
	case a.PCIeRoot != "" && a.PCIeRoot == b.PCIeRoot:
		return LinkPCIeHostBridge
	case a.NUMA >= 0 && a.NUMA == b.NUMA:
		return LinkNUMA
	}
	return LinkSystem
}

// WorstPair returns the worst link class over all pairs of the set, and
// LinkSameGPU for sets of fewer than two devices.
func WorstPair(set []GPU) LinkClass {
	worst := LinkSameGPU
	for i := range set {
		for j := i + 1; j < len(set); j++ {
			if c := Pair(set[i], set[j]); c > worst {
				worst = c
			}
		}
	}
	return worst
}

// BestClass is the best worst-pair class that n of one node's whole GPUs
// can have: the first class one of whose groups (an NVLink domain, a
// PCIe switch, a PCIe root, a NUMA node) holds n of them, LinkSystem when
// only the node as a whole does, LinkNetwork when it has fewer than n.
// It reads the classes as nested, as servers lay them out.
func BestClass(gpus []GPU, n int) LinkClass {
	switch {
	case n > len(gpus):
		return LinkNetwork
	case n < 2:
		return LinkSameGPU
	}
	keys := []func(GPU) string{
		func(g GPU) string { return g.NVLinkDomain },
		func(g GPU) string { return g.PCIeSwitch },
		func(g GPU) string { return g.PCIeRoot },
		func(g GPU) string { return numaKey(g.NUMA) },
	}
	for i, key := range keys {
		counts := map[string]int{}
		for _, g := range gpus {
			if k := key(g); k != "" {
				counts[k]++
				if counts[k] >= n {
					return LinkNVLink + LinkClass(i)
				}
			}
		}
	}
	return LinkSystem
}

// BestSetClass is the best worst-pair class among every n of gpus,
// found by trying every set (BestClass's exact counterpart, for the
// benchmarks' judgement of a placement; it is exponential in n).
// LinkNetwork when there are fewer than n.
func BestSetClass(gpus []GPU, n int) LinkClass {
	best := LinkNetwork
	if n > len(gpus) {
		return best
	}
	set := make([]GPU, n)
	var rec func(start, k int)
	rec = func(start, k int) {
		if k == n {
			best = min(best, WorstPair(set))
			return
		}
		for i := start; i <= len(gpus)-(n-k); i++ {
			set[k] = gpus[i]
			rec(i+1, k+1)
		}
	}
	rec(0, 0)
	return best
}
