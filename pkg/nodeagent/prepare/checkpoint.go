package prepare

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputopo/gputopo/pkg/nodeagent/atomicfile"
)

// checkpointVersion is bumped on incompatible changes of the format; an
// agent refuses a checkpoint of a version it does not know rather than
// guess. Version 2 added MIGInstance.Creating; a version 1 checkpoint is
// read as one (migrateV1). Version 3 records more than one CDI device per
// device (visibility devices) and numbered names for further shares of a
// GPU; versions 1 and 2 recorded one "<claim UID>-<device>" each, which
// version 3 reads unchanged.
const checkpointVersion = 3

// Claim is a prepared (or half-prepared) claim as the checkpoint keeps it.
type Claim struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Prepared is false while prepare is under way: after a crash, the
	// next prepare or unprepare of the claim finishes or undoes it.
	Prepared bool     `json:"prepared"`
	Devices  []Device `json:"devices"`
}

// Device is one prepared device of a claim.
type Device struct {
	Requests []string `json:"requests"`
	Pool     string   `json:"pool"`
	Device   string   `json:"device"`
	ShareID  string   `json:"shareID,omitempty"`
	// Share is what a share of a shared GPU consumes.
	Share        *Share   `json:"share,omitempty"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
	// AdminAccess: the device is prepared for an admin-access request; it
	// holds nothing (no conflicts) and owns no MIG instance.
	AdminAccess bool `json:"adminAccess,omitempty"`
	// MIG is the GPU and compute instance created for a MIG placement.
	MIG *MIGInstance `json:"mig,omitempty"`
}

// Share is the capacity one share of a shared GPU was allocated.
type Share struct {
	MemoryMiB      int64 `json:"memoryMiB,omitempty"`
	ComputePercent int64 `json:"computePercent,omitempty"`
}

// MIGInstance identifies a created MIG instance.
type MIGInstance struct {
	ParentUUID string `json:"parentUUID"`
	ProfileID  int    `json:"profileID"`
	CIProfile  int    `json:"ciProfileID"`
	Start      int    `json:"start"`
	// GI and CI are NVML's instance IDs; Created is false while the
	// agent has recorded the intent but not yet the created instances.
	GI      uint32 `json:"gi"`
	CI      uint32 `json:"ci"`
	Created bool   `json:"created"`
	// Creating is recorded before the agent asks NVML for the instance:
	// after a crash, an instance found at the placement may be the one
	// it was creating and is adopted. Without it, an instance there was
	// made by someone else and is never adopted.
	Creating bool `json:"creating,omitempty"`
	// Identity is what NVML said about the GPU instance when it was
	// created; nil in checkpoints of agents that did not record it.
	Identity *GIIdentity `json:"identity,omitempty"`
	// UUID is the MIG device's, as NVML reports it ("MIG-<uuid>"): what
	// CUDA and NVIDIA's container toolkit name the device by. Empty in
	// checkpoints of agents that did not record it.
	UUID string `json:"uuid,omitempty"`
}

// GIIdentity tells a GPU instance apart from a later one with the same
// ID (NVML reuses the IDs of destroyed instances): its profile (NVML's
// GpuInstanceInfo.ProfileId, the profile's own ID, which on real GPUs
// differs from the profile index in ProfileID) and its placement.
type GIIdentity struct {
	ProfileID uint32 `json:"profileID"`
	Start     uint32 `json:"start"`
	Size      uint32 `json:"size"`
}

func identityOf(info nvml.GpuInstanceInfo) *GIIdentity {
	return &GIIdentity{ProfileID: info.ProfileId, Start: info.Placement.Start, Size: info.Placement.Size}
}

// is tells whether NVML's description of a GPU instance is this one's.
func (id GIIdentity) is(info nvml.GpuInstanceInfo) bool {
	return id == *identityOf(info)
}

// samePlacement: o is an instance of the same profile at the same place
// on the same GPU.
func (m MIGInstance) samePlacement(o MIGInstance) bool {
	return m.ParentUUID == o.ParentUUID && m.ProfileID == o.ProfileID && m.CIProfile == o.CIProfile && m.Start == o.Start
}

type checkpointFile struct {
	Version  int    `json:"version"`
	Checksum string `json:"checksum"`
	// BootID is the boot the checkpoint was written in (boot.ID); empty
	// in checkpoints of agents that did not record it.
	BootID string           `json:"bootID,omitempty"`
	Claims map[string]Claim `json:"claims"`
}

func checksum(claims map[string]Claim) (string, error) {
	data, err := json.Marshal(claims) // map keys are sorted: stable
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// recoverHint follows every error that stops the agent on its checkpoint.
const recoverHint = "docs/nodeagent.md says how to recover"

// loadCheckpoint reads the checkpoint and the boot it was written in; a
// missing file is an empty one.
func loadCheckpoint(path string) (map[string]Claim, string, error) {
	data, err := atomicfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Claim{}, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w", path, err)
	}
	var f checkpointFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w (%s)", path, err, recoverHint)
	}
	if f.Version < 1 || f.Version > checkpointVersion {
		return nil, "", fmt.Errorf("checkpoint %s: version %d, this agent reads versions 1 to %d (%s)", path, f.Version, checkpointVersion, recoverHint)
	}
	if f.Claims == nil {
		f.Claims = map[string]Claim{}
	}
	sum, err := checksum(f.Claims)
	if err != nil {
		return nil, "", err
	}
	if sum != f.Checksum {
		return nil, "", fmt.Errorf("checkpoint %s: checksum mismatch (file corrupt or edited; %s)", path, recoverHint)
	}
	if f.Version == 1 {
		migrateV1(f.Claims)
	}
	return f.Claims, f.BootID, nil
}

// forgetBeforeReboot clears the MIG instances claims made or were making
// in an earlier boot: a reboot destroyed them all, so an instance at the
// same placement now is someone else's (mig-manager's boot-time layout)
// and must not be adopted, nor destroyed as the claim's. A claim that
// held one is prepared again. It says whether any was cleared.
func forgetBeforeReboot(claims map[string]Claim) bool {
	cleared := false
	for uid, c := range claims {
		for _, d := range c.Devices {
			if m := d.MIG; m != nil && (m.Created || m.Creating) {
				m.GI, m.CI, m.Created, m.Creating, m.Identity, m.UUID = 0, 0, false, false, nil, ""
				c.Prepared = false
				cleared = true
			}
		}
		claims[uid] = c
	}
	return cleared
}

// migrateV1 reads a version 1 checkpoint, which recorded a MIG instance
// it was about to create as not created: the agent may have created it
// before it stopped, so it is marked Creating, to be adopted or
// destroyed as the agent's own.
func migrateV1(claims map[string]Claim) {
	for _, c := range claims {
		for _, d := range c.Devices {
			if m := d.MIG; m != nil && !m.Created {
				m.Creating = true
			}
		}
	}
}

// saveCheckpoint replaces the checkpoint atomically: write a temporary
// file, sync it, rename it over the old one, sync the directory.
func saveCheckpoint(path, bootID string, claims map[string]Claim) error {
	sum, err := checksum(claims)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(checkpointFile{Version: checkpointVersion, Checksum: sum, BootID: bootID, Claims: claims}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(path, data); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// writeFile writes the checkpoint; tests make it fail.
var writeFile = atomicfile.Write
