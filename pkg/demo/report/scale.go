package report

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// span is a data range mapped onto a pixel range.
type span struct{ lo, hi, p0, p1 float64 }

func (s span) at(v float64) float64 { return s.p0 + (v-s.lo)/(s.hi-s.lo)*(s.p1-s.p0) }

// niceStep picks a tick step of 1, 2, 2.5 or 5 x 10^k giving about n ticks.
func niceStep(extent float64, n int) float64 {
	if extent <= 0 || n <= 0 {
		return 1
	}
	raw := extent / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// ticks lists the multiples of step within [lo, hi], counted in whole
// steps and rounded to 12 digits so that 3 x 0.1 prints as 0.3.
func ticks(lo, hi, step float64) []float64 {
	var out []float64
	for k := int(math.Ceil(lo/step - 1e-9)); float64(k)*step <= hi+step*1e-9; k++ {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(k)*step, 'g', 12, 64), 64)
		out = append(out, v)
	}
	return out
}

// ceilTo rounds v up to a multiple of step.
func ceilTo(v, step float64) float64 { return math.Ceil(v/step-1e-9) * step }

// px prints an SVG coordinate with at most one decimal: finer is invisible
// and only makes the page bigger.
func px(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		return "0"
	}
	return s
}

// spread moves label positions apart so that no two are closer than gap,
// keeping them within [lo, hi] and as near their wanted positions as the
// gap allows; it returns the new positions in the input order.
func spread(want []float64, gap, lo, hi float64) []float64 {
	idx := make([]int, len(want))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(want[a], want[b]) })
	out := make([]float64, len(want))
	prev := math.Inf(-1)
	for _, i := range idx {
		out[i] = max(want[i], prev+gap, lo)
		prev = out[i]
	}
	// Pushed past the bottom: shift the tail back up, keeping the gaps.
	next := math.Inf(1)
	for k := len(idx) - 1; k >= 0; k-- {
		i := idx[k]
		out[i] = min(out[i], next-gap, hi)
		next = out[i]
	}
	return out
}

// mix blends two #rrggbb colors, t = 0 giving a and 1 giving b.
func mix(a, b string, t float64) string {
	t = min(max(t, 0), 1)
	var out [3]uint8
	for i := range 3 {
		x, _ := strconv.ParseUint(a[1+2*i:3+2*i], 16, 8)
		y, _ := strconv.ParseUint(b[1+2*i:3+2*i], 16, 8)
		out[i] = uint8(math.Round(float64(x) + t*(float64(y)-float64(x))))
	}
	return "#" + hex2(out[0]) + hex2(out[1]) + hex2(out[2])
}

func hex2(v uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4], digits[v&15]})
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
