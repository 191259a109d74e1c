package allocator

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Counter amounts are exact, as upstream's resource.Quantity arithmetic
// is: 2P + 2P does not fit in 3P, 500u + 500u fits in 1m, and negative
// totals and consumptions count as what they are. Each pool counts its
// counters in one unit, a power of ten in which every total and
// consumption of the pool is a whole number. When every amount, and every
// sum the search can form, fits int64 (the usual case: memory in bytes,
// slices, multiprocessors), the search adds int64s and nothing else.
// Otherwise the pool also keeps its amounts as big integers, and the runs
// that could leave int64 compute with those (counters.go); the int64
// amounts are then scaled approximations, read only by scoring.

// int64Safe bounds, as a float64 with room for rounding, the magnitudes
// whose sums are known to fit int64 (2^63).
const int64Safe = 1 << 61

// maxUnitDigits bounds how many powers of ten one pool's amounts may span
// (the largest over the smallest non-zero one). Exponents up to 2^31
// parse, and one pool with both 1e1000000000 and 1n would need integers
// of hundreds of megabytes; upstream computes with them (its Quantity
// arithmetic rescales to the finer amount), or runs out of memory. The
// engine marks such a pool invalid instead, naming both amounts. At the
// bound an integer takes about 41 KB, far beyond any counter.
const maxUnitDigits = 100000

// exactCounters are a pool's amounts as big integers in its unit, set
// when some amount, or the sum of all of a counter's amounts, does not
// fit int64.
type exactCounters struct {
	total     []*big.Int
	uses      [][]*big.Int // parallel to pool.uses
	otherUses [][]*big.Int // parallel to pool.otherUses
}

// setAmounts stores the pool's counter totals (from: the slice of each)
// and its devices' (uses) and other devices' (otherUses) consumptions in
// the pool's unit; the quantities are parallel to counterNames, p.uses
// and p.otherUses. It returns why the pool is invalid, or "".
func (p *pool) setAmounts(totals []resource.Quantity, from []*resourceapi.ResourceSlice, uses, otherUses [][]resource.Quantity) string {
	all := append([]resource.Quantity(nil), totals...)
	for _, u := range uses {
		all = append(all, u...)
	}
	for _, u := range otherUses {
		all = append(all, u...)
	}
	ints, bigs, span := wholeUnits(all)
	if span != nil {
		return fmt.Sprintf("%s (%s) and %s (%s) are %d powers of ten apart, more than the %d the engine computes with",
			p.amountLabel(span.lo, from), all[span.lo].String(), p.amountLabel(span.hi, from), all[span.hi].String(), span.digits, maxUnitDigits)
	}
	if bigs == nil {
		p.counterBound = counterBound(len(totals), ints, p.uses, p.otherUses)
		if p.counterBound < int64Safe {
			p.assign(ints)
			return ""
		}
		bigs = make([]*big.Int, len(ints))
		for i, v := range ints {
			bigs[i] = big.NewInt(v)
		}
	}
	exact := &exactCounters{total: bigs[:len(totals)]}
	rest := bigs[len(totals):]
	exact.uses, rest = splitLike(rest, p.uses)
	exact.otherUses, _ = splitLike(rest, p.otherUses)
	if f := exactBound(exact, len(totals), p.uses, p.otherUses); f < int64Safe {
		// Not all whole numbers of units (500u) or not all below 2^63
		// units (10E), but within int64 in the pool's own unit (1u, 1E).
		p.counterBound = f
		ints = make([]int64, len(bigs))
		for i, b := range bigs {
			ints[i] = b.Int64()
		}
		p.assign(ints)
		return ""
	}
	p.exact, p.counterBound = exact, math.Inf(1)
	p.assign(approximate(bigs))
	return ""
}

// amountLabel names the k-th amount in setAmounts' order: a counter
// total (from holds the slice of each) or a device's consumption.
func (p *pool) amountLabel(k int, from []*resourceapi.ResourceSlice) string {
	if k < len(p.counterNames) {
		c := p.counterNames[k]
		return fmt.Sprintf("ResourceSlice %s: sharedCounters %s: counter %s", from[k].Name, c.set, c.counter)
	}
	k -= len(p.counterNames)
	for i, us := range [][][]counterUse{p.uses, p.otherUses} {
		devs := [][]*device{p.devices, p.others}[i]
		for li, u := range us {
			if k < len(u) {
				d, c := devs[li], p.counterNames[u[k].idx]
				return fmt.Sprintf("ResourceSlice %s: device %s: consumesCounters %s: counter %s", d.slice.Name, d.api.Name, c.set, c.counter)
			}
			k -= len(u)
		}
	}
	return "?"
}

// assign spreads the pool's amounts, in setAmounts' order, over
// counterTotal, uses and otherUses.
func (p *pool) assign(ints []int64) {
	p.counterTotal = ints[:len(p.counterNames):len(p.counterNames)]
	i := len(p.counterNames)
	for _, us := range [][][]counterUse{p.uses, p.otherUses} {
		for _, u := range us {
			for j := range u {
				u[j].milli = ints[i]
				i++
			}
		}
	}
}

// splitLike cuts values into one slice per entry of shape, of the same
// lengths, and returns the rest.
func splitLike(values []*big.Int, shape [][]counterUse) ([][]*big.Int, []*big.Int) {
	out := make([][]*big.Int, len(shape))
	for i, u := range shape {
		out[i], values = values[:len(u):len(u)], values[len(u):]
	}
	return out, values
}

// counterBound is, over the pool's counters, the largest sum of the
// magnitudes of its total and of every consumption of it (a device that
// lists a counter twice counts twice): the available amount after the
// ledger, and what one claim's devices consume, both stay within it.
func counterBound(nCounters int, ints []int64, uses, otherUses [][]counterUse) float64 {
	sum := make([]float64, nCounters)
	for i := range sum {
		sum[i] = math.Abs(float64(ints[i]))
	}
	i := nCounters
	for _, us := range [][][]counterUse{uses, otherUses} {
		for _, u := range us {
			for _, c := range u {
				sum[c.idx] += math.Abs(float64(ints[i]))
				i++
			}
		}
	}
	bound := 0.0
	for _, s := range sum {
		bound = math.Max(bound, s)
	}
	return bound
}

// exactBound is counterBound for big amounts.
func exactBound(e *exactCounters, nCounters int, uses, otherUses [][]counterUse) float64 {
	sum := make([]float64, nCounters)
	for i, t := range e.total {
		f, _ := new(big.Float).SetInt(t).Float64()
		sum[i] = math.Abs(f)
	}
	for k, us := range [][][]counterUse{uses, otherUses} {
		amounts := [][][]*big.Int{e.uses, e.otherUses}[k]
		for d, u := range us {
			for j, c := range u {
				f, _ := new(big.Float).SetInt(amounts[d][j]).Float64()
				sum[c.idx] += math.Abs(f)
			}
		}
	}
	bound := 0.0
	for _, s := range sum {
		bound = math.Max(bound, s)
	}
	return bound
}

// wholeUnits returns the quantities as whole multiples of one power of
// ten: as int64s when they all are whole numbers that fit (the common
// case, which allocates nothing but the result), otherwise as big
// integers in the coarsest unit in which all are whole.
func wholeUnits(qs []resource.Quantity) ([]int64, []*big.Int, *spanError) {
	ints := make([]int64, len(qs))
	for i := range qs {
		v, ok := qs[i].AsInt64()
		if !ok {
			bigs, err := exactUnits(qs)
			return nil, bigs, err
		}
		ints[i] = v
	}
	return ints, nil, nil
}

// spanError: amounts lo and hi (indices) are digits powers of ten apart,
// more than maxUnitDigits.
type spanError struct {
	lo, hi int
	digits int64
}

var bigTen = big.NewInt(10)

func exactUnits(qs []resource.Quantity) ([]*big.Int, *spanError) {
	mantissa := make([]*big.Int, len(qs))
	exp := make([]int64, len(qs))
	lo, hi := -1, -1
	for i := range qs {
		q := qs[i] // AsDec converts the copy, never the caller's
		d := q.AsDec()
		m, e := new(big.Int).Set(d.UnscaledBig()), -int64(d.Scale())
		if m.Sign() != 0 {
			// Strip trailing zeros, so that 2P is 2e15, not 2000e12.
			text := m.Text(10)
			if z := len(text) - len(strings.TrimRight(text, "0")); z > 0 {
				m.SetString(text[:len(text)-z], 10)
				e += int64(z)
			}
			if lo < 0 || e < exp[lo] {
				lo = i
			}
			if hi < 0 || e > exp[hi] {
				hi = i
			}
		}
		mantissa[i], exp[i] = m, e
	}
	if lo < 0 {
		return mantissa, nil
	}
	if d := exp[hi] - exp[lo]; d > maxUnitDigits {
		return nil, &spanError{lo: lo, hi: hi, digits: d}
	}
	for i, m := range mantissa {
		if m.Sign() != 0 && exp[i] > exp[lo] {
			m.Mul(m, new(big.Int).Exp(bigTen, big.NewInt(exp[i]-exp[lo]), nil))
		}
	}
	return mantissa, nil
}

// approximate scales big amounts down to int64s that keep their ratios to
// about 15 digits, for scoring.
func approximate(bigs []*big.Int) []int64 {
	maxBits := 0
	for _, b := range bigs {
		maxBits = max(maxBits, b.BitLen())
	}
	shift := uint(max(0, maxBits-52))
	out := make([]int64, len(bigs))
	for i, b := range bigs {
		out[i] = new(big.Int).Rsh(b, shift).Int64()
	}
	return out
}
