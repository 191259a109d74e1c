package prepare

import (
	"fmt"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gputopo/gputopo/pkg/nodeagent/resources"
)

// CDI: one spec per claim, vendor "k8s.<driver>", class "claim", one CDI
// device per prepared device named "<claim UID>-<device>": the claim UID
// makes names unique so that runtimes caching specs never hit a stale
// device (kubeletplugin.DRAPlugin's advice).

const cdiClass = "claim"

func (p *Preparer) cdiVendor() string { return "k8s." + p.layout.Driver }

func (p *Preparer) cdiName(claimUID, device string) string {
	return fmt.Sprintf("%s/%s=%s-%s", p.cdiVendor(), cdiClass, claimUID, device)
}

func (p *Preparer) specName(claimUID string) string {
	return cdi.GenerateTransientSpecName(p.cdiVendor(), cdiClass, claimUID)
}

// writeSpec writes the claim's CDI spec: the control device nodes every
// GPU container needs, and per device its device node (whole GPUs) and
// the UUID or MIG ID the NVIDIA container stack selects it by.
func (p *Preparer) writeSpec(c Claim) error {
	spec := &cdispec.Spec{
		Kind: p.cdiVendor() + "/" + cdiClass,
		ContainerEdits: cdispec.ContainerEdits{
			DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidiactl"}, {Path: "/dev/nvidia-uvm"}, {Path: "/dev/nvidia-uvm-tools"}},
		},
	}
	var visible []string
	for _, d := range c.Devices {
		dev, ok := p.layout.Device(d.Device)
		if !ok {
			return fmt.Errorf("device %s not published by this node", d.Device)
		}
		id := dev.GPU.UUID
		edits := cdispec.ContainerEdits{}
		if d.MIG != nil {
			id = d.MIG.ID()
		} else {
			edits.DeviceNodes = []*cdispec.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", dev.GPU.Minor)}}
		}
		visible = append(visible, id)
		edits.Env = []string{fmt.Sprintf("GPUTOPO_DEVICE_%s=%s", envName(d.Device), id)}
		if d.Share != nil {
			edits.Env = append(edits.Env, shareEnv(dev, *d.Share)...)
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: c.UID + "-" + d.Device, ContainerEdits: edits})
	}
	// All of the claim's GPUs, for the NVIDIA container toolkit.
	spec.ContainerEdits.Env = []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(visible, ",")}
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", c.UID, err)
	}
	spec.Version = version
	if err := p.cdi.WriteSpec(spec, p.specName(c.UID)); err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", c.UID, err)
	}
	return nil
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
