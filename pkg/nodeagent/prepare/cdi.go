package prepare

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// CDI: one spec per claim, vendor "k8s.<driver>", class "claim". Each of
// the claim's results gets a CDI device named "<claim>-<device>", where
// <claim> is the claim UID and a short hash of the claim's
// resourceVersion when it was prepared: names are never reused for other
// content, so that runtimes caching specs never hit a stale device
// (kubeletplugin.DRAPlugin's advice), also when a claim is allocated
// other devices and prepared again. A claim may hold several shares of
// one GPU (upstream allocates a shareable device more than once per
// claim); each further share is "<claim>-<device>.<n>", and as device
// names are DNS labels the dot never collides.
//
// NVIDIA_VISIBLE_DEVICES tells NVIDIA's container toolkit which GPUs a
// container gets. The runtime keeps one value of a variable, the last
// one the injected CDI devices set, so the list cannot be built up device
// by device; it is set once for a group of devices:
//   - in an extended-resource claim (a pod's nvidia.com/gpu: N), the
//     kubelet gives each container only the devices of its own requests,
//     and each container's requests are named for it. Every device also
//     carries its container's visibility device,
//     "<claim>-visible.container-<i>", which lists that container's
//     GPUs, so containers do not see each other's;
//   - otherwise the spec lists all of the claim's GPUs, which every
//     container that gets any device of the claim sees.

const cdiClass = "claim"

func (p *Preparer) cdiVendor() string { return "k8s." + p.layout.Driver }

func (p *Preparer) cdiName(claim, device string) string {
	return fmt.Sprintf("%s/%s=%s-%s", p.cdiVendor(), cdiClass, claim, device)
}

// cdiClaimName is <claim> above. An object without a resourceVersion
// (not read from the API server) is named by its UID alone.
func cdiClaimName(claim *resourceapi.ResourceClaim) string {
	if claim.ResourceVersion == "" {
		return string(claim.UID)
	}
	sum := sha256.Sum256([]byte(claim.ResourceVersion))
	return string(claim.UID) + "-" + hex.EncodeToString(sum[:4])
}

func (p *Preparer) specName(claimUID string) string {
	return cdi.GenerateTransientSpecName(p.cdiVendor(), cdiClass, claimUID)
}

// assignCDIDevices names each device's CDI devices (see above).
func (p *Preparer) assignCDIDevices(c *Claim, claim *resourceapi.ResourceClaim) {
	extendedResource := claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true"
	base := cdiClaimName(claim)
	perContainer := extendedResource
	containers := make([]int, len(c.Devices))
	for i, d := range c.Devices {
		ci, ok := containerOf(d)
		containers[i], perContainer = ci, perContainer && ok
	}
	seen := make(map[string]int, len(c.Devices))
	for i := range c.Devices {
		d := &c.Devices[i]
		name := d.Device
		if n := seen[d.Device]; n > 0 {
			name = fmt.Sprintf("%s.%d", d.Device, n)
		}
		seen[d.Device]++
		d.CDIDeviceIDs = []string{p.cdiName(base, name)}
		if perContainer {
			d.CDIDeviceIDs = append(d.CDIDeviceIDs, p.cdiName(base, fmt.Sprintf("visible.container-%d", containers[i])))
		}
	}
}

// containerOf is the container an extended-resource claim's device
// serves, read from its request's name.
func containerOf(d Device) (int, bool) {
	if len(d.Requests) != 1 {
		return 0, false
	}
	return contract.ExtendedRequestContainer(d.Requests[0])
}

// writeSpec writes the claim's CDI spec: the control device nodes every
// GPU container needs; per device its device node (whole GPUs), the UUID
// or MIG ID the NVIDIA container stack selects it by and a share's
// limits; and NVIDIA_VISIBLE_DEVICES, for the claim or per visibility
// device. The names come from the devices' recorded CDI IDs, which the
// kubelet keeps.
func (p *Preparer) writeSpec(c Claim) error {
	spec := &cdispec.Spec{
		Kind: p.cdiVendor() + "/" + cdiClass,
		ContainerEdits: cdispec.ContainerEdits{
			DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidiactl"}, {Path: "/dev/nvidia-uvm"}, {Path: "/dev/nvidia-uvm-tools"}},
		},
	}
	var all, groups []string
	visible := make(map[string][]string)
	for _, d := range c.Devices {
		id, edits, err := p.deviceEdits(d)
		if err != nil {
			return fmt.Errorf("CDI spec of claim %s: %w", claimRef(c), err)
		}
		names, err := cdiDeviceNames(d)
		if err != nil {
			return fmt.Errorf("CDI spec of claim %s: %w", claimRef(c), err)
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: names[0], ContainerEdits: edits})
		all = appendNew(all, id)
		for _, g := range names[1:] {
			if _, ok := visible[g]; !ok {
				groups = append(groups, g)
			}
			visible[g] = appendNew(visible[g], id)
		}
	}
	if len(groups) == 0 {
		spec.ContainerEdits.Env = []string{visibleDevices(all)}
	}
	for _, g := range groups {
		spec.Devices = append(spec.Devices, cdispec.Device{Name: g, ContainerEdits: cdispec.ContainerEdits{Env: []string{visibleDevices(visible[g])}}})
	}
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", claimRef(c), err)
	}
	spec.Version = version
	if err := p.cdi.WriteSpec(spec, p.specName(c.UID)); err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", claimRef(c), err)
	}
	return nil
}

// deviceEdits is what a device's own CDI device injects, and the ID the
// NVIDIA container stack knows it by.
func (p *Preparer) deviceEdits(d Device) (string, cdispec.ContainerEdits, error) {
	dev, ok := p.layout.Device(d.Device)
	if !ok {
		// Only a claim prepared before the node's GPUs or mode changed
		// gets here: a new claim's devices are checked as it is planned.
		return "", cdispec.ContainerEdits{}, fmt.Errorf("device %q (requests %v) was prepared for it but is no longer published by this node: its GPUs or mode changed since", d.Device, d.Requests)
	}
	id := dev.GPU.UUID
	var edits cdispec.ContainerEdits
	if d.MIG != nil {
		var err error
		if id, err = p.migDeviceUUID(d.MIG); err != nil {
			return "", cdispec.ContainerEdits{}, fmt.Errorf("device %s: %w", d.Device, err)
		}
	} else {
		edits.DeviceNodes = []*cdispec.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", dev.GPU.Minor)}}
	}
	edits.Env = []string{fmt.Sprintf("GPUTOPO_DEVICE_%s=%s", envName(d.Device), id)}
	if d.Share != nil {
		edits.Env = append(edits.Env, shareEnv(dev, *d.Share)...)
	}
	return id, edits, nil
}

// cdiDeviceNames are the names, in this claim's spec, of the device's
// recorded CDI IDs.
func cdiDeviceNames(d Device) ([]string, error) {
	if len(d.CDIDeviceIDs) == 0 {
		return nil, fmt.Errorf("device %s has no CDI device recorded", d.Device)
	}
	names := make([]string, 0, len(d.CDIDeviceIDs))
	for _, id := range d.CDIDeviceIDs {
		_, name, ok := strings.Cut(id, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("device %s: recorded CDI device %q has no name", d.Device, id)
		}
		names = append(names, name)
	}
	return names, nil
}

func visibleDevices(ids []string) string {
	return "NVIDIA_VISIBLE_DEVICES=" + strings.Join(ids, ",")
}

func appendNew(ids []string, id string) []string {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// shareEnv limits a share of a shared GPU under the CUDA MPS control
// daemon: its compute percentage and pinned memory.
func shareEnv(dev resources.Device, s Share) []string {
	var env []string
	if s.ComputePercent > 0 {
		env = append(env, fmt.Sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", s.ComputePercent))
	}
	if s.MemoryMiB > 0 {
		env = append(env, fmt.Sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s=%dM", dev.GPU.UUID, s.MemoryMiB))
	}
	return env
}

func (p *Preparer) removeSpec(uid string) error {
	if err := p.cdi.RemoveSpec(p.specName(uid)); err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", uid, err)
	}
	return nil
}

func envName(device string) string {
	return strings.ToUpper(strings.ReplaceAll(device, "-", "_"))
}
