package allocator

// Admin access takes no device: the scheduler's tracker of allocated
// devices does not count such results (upstream's allocateddevices.go),
// so once written they leave the device free for every other claim. A
// solution is therefore scored as if its admin-access picks were not
// there: they neither use up free GPUs nor describe the workload. During
// the search they still hold their devices and counters against the
// pod's other requests, as upstream's allocator does within one
// allocation.

// liftAdminPicks takes the run's admin-access picks, and what they hold,
// out of the run until the returned func puts them back; nil when there
// are none.
func (r *run) liftAdminPicks() func() {
	if !r.s.admin {
		return nil
	}
	var lifted []pick
	kept := make([][]pick, len(r.picks))
	for c, picks := range r.picks {
		for _, pk := range picks {
			if pk.q.admin {
				lifted = append(lifted, pk)
			} else {
				kept[c] = append(kept[c], pk)
			}
		}
	}
	if len(lifted) == 0 {
		return nil
	}
	saved := r.picks
	r.picks = kept
	for _, pk := range lifted {
		r.hold(pk, -1)
	}
	return func() {
		for _, pk := range lifted {
			r.hold(pk, 1)
		}
		r.picks = saved
	}
}

// hold adds (sign 1) or removes (sign -1) what a pick holds in the run:
// its device or its share of one, and its counters.
func (r *run) hold(pk pick, sign int) {
	switch {
	case pk.shared:
		r.addPending(pk.dev, r.capFitOf(pk.q, pk.dev), sign)
	case sign > 0:
		r.owners[pk.dev] = append(r.owners[pk.dev], int32(pk.q.claim))
	default:
		r.owners[pk.dev] = withoutOwner(r.owners[pk.dev], int32(pk.q.claim))
	}
	if pk.counted {
		pi, li := r.view.locate(pk.dev)
		r.addCounters(pi, li, int64(sign))
	}
}

// withoutOwner removes claim's last entry from a device's owners.
func withoutOwner(owners []int32, claim int32) []int32 {
	for i := len(owners) - 1; i >= 0; i-- {
		if owners[i] == claim {
			return append(owners[:i], owners[i+1:]...)
		}
	}
	return owners
}
