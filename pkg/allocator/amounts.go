package allocator

import (
	"fmt"
	"math"
	"math/big"

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
// (the largest over the smallest non-zero one). Exponents up to 2^31 parse,
// and one pool with both 1e100000000 and 1n would need integers of
// hundreds of megabytes; upstream would compute with them too, or run out
// of memory. The engine marks such a pool invalid instead.
const maxUnitDigits = 1000

// exactCounters are a pool's amounts as big integers in its unit, set
// when some amount, or the sum of all of a counter's amounts, does not
// fit int64.
type exactCounters struct {
	total     []*big.Int
	uses      [][]*big.Int // parallel to pool.uses
	otherUses [][]*big.Int // parallel to pool.otherUses
}

// setAmounts stores the pool's counter totals and its devices' (uses) and
// other devices' (otherUses) consumptions in the pool's unit; the
// quantities are parallel to counterTotal, p.uses and p.otherUses. It
// returns why the pool is invalid, or "".
func (p *pool) setAmounts(totals []resource.Quantity, uses, otherUses [][]resource.Quantity) string {
	all := append([]resource.Quantity(nil), totals...)
	for _, u := range uses {
		all = append(all, u...)
	}
	for _, u := range otherUses {
		all = append(all, u...)
	}
	ints, bigs, err := wholeUnits(all)
	if err != nil {
		return fmt.Sprintf("shared counters of resource pool %s: %v", p, err)
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
	p.exact = &exactCounters{total: bigs[:len(totals)]}
	rest := bigs[len(totals):]
	p.exact.uses, rest = splitLike(rest, p.uses)
	p.exact.otherUses, _ = splitLike(rest, p.otherUses)
	p.counterBound = math.Inf(1)
	if f := exactBound(p.exact, len(totals), p.uses, p.otherUses); f < int64Safe {
		// Amounts that needed a finer unit than int64 could hold at
		// first (a value that is not a whole number of units) and fit
		// once scaled: exact as int64s after all.
		p.counterBound = f
		p.exact = nil
		ints = make([]int64, len(bigs))
		for i, b := range bigs {
			ints[i] = b.Int64()
		}
		p.assign(ints)
		return ""
	}
	p.assign(approximate(bigs))
	return ""
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
func wholeUnits(qs []resource.Quantity) ([]int64, []*big.Int, error) {
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

var bigTen = big.NewInt(10)

func exactUnits(qs []resource.Quantity) ([]*big.Int, error) {
	mantissa := make([]*big.Int, len(qs))
	exp := make([]int64, len(qs))
	minExp, maxExp := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range qs {
		q := qs[i] // AsDec converts the copy, never the caller's
		d := q.AsDec()
		m, e := new(big.Int).Set(d.UnscaledBig()), -int64(d.Scale())
		if m.Sign() != 0 {
			// Strip trailing zeros, so that 2P is 2e15, not 2000e12.
			quo, rem := new(big.Int), new(big.Int)
			for {
				quo.QuoRem(m, bigTen, rem)
				if rem.Sign() != 0 {
					break
				}
				m, quo = quo, m
				e++
			}
			minExp, maxExp = min(minExp, e), max(maxExp, e)
		}
		mantissa[i], exp[i] = m, e
	}
	if maxExp-minExp > maxUnitDigits {
		return nil, fmt.Errorf("amounts span 10^%d (more than 10^%d), from %s to %s", maxExp-minExp, maxUnitDigits, decString(minExp), decString(maxExp))
	}
	for i, m := range mantissa {
		if m.Sign() != 0 && exp[i] > minExp {
			m.Mul(m, new(big.Int).Exp(bigTen, big.NewInt(exp[i]-minExp), nil))
		}
	}
	return mantissa, nil
}

func decString(exp int64) string { return fmt.Sprintf("1e%d", exp) }

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
