package prepare

import "fmt"

// checkShares refuses a claim whose shares would take a shared GPU past
// its memory or its 100% of compute, counting the shares prepared for
// other claims. The scheduler's ledger keeps shares within the capacity
// the node publishes, so this holds only when that ledger was wrong: an
// allocation the scheduler lost track of for a moment (upstream's
// Unreserve restores a claim's older copy while the write of its
// allocation may still land), or one made by another scheduler. Exclusive
// devices are guarded by conflict; this is the guard for shares, here
// where the GPU's capacity is known.
func (p *Preparer) checkShares(c Claim) error {
	used := map[string]Share{}
	add := func(d Device) Share {
		if d.ShareID == "" || d.Share == nil || d.AdminAccess {
			return used[d.Device]
		}
		u := used[d.Device]
		u.MemoryMiB += d.Share.MemoryMiB
		u.ComputePercent += d.Share.ComputePercent
		used[d.Device] = u
		return u
	}
	for _, other := range p.claims {
		if other.UID == c.UID {
			continue
		}
		for _, od := range other.Devices {
			add(od)
		}
	}
	for _, d := range c.Devices {
		u := add(d)
		if d.Share == nil {
			continue
		}
		dev, ok := p.layout.Device(d.Device)
		if !ok {
			continue // planDevice refused it already
		}
		if u.MemoryMiB > dev.GPU.MemoryMiB || u.ComputePercent > 100 {
			return fmt.Errorf("%w: device %s of claim %s: the shares prepared on it would take %d MiB of its %d MiB and %d%% of its compute; the scheduler allocated more than the GPU has",
				ErrConflict, d.Device, claimRef(c), u.MemoryMiB, dev.GPU.MemoryMiB, u.ComputePercent)
		}
	}
	return nil
}
