package normalize

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"
)

// TestNormalize runs each normalization on raw ratings (ToScore of a
// rating) and checks the framework scores it makes of them.
func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		normalize func(fwk.NodeScoreList)
		in, out   []int64
	}{
		{"MinMax spread", MinMax, []int64{ToScore(88), ToScore(100), ToScore(76)}, []int64{50, 100, 0}},
		{"MinMax all equal", MinMax, []int64{5, 5}, []int64{100, 100}},
		{"MinMax negative raw", MinMax, []int64{ToScore(-900), ToScore(100)}, []int64{0, 100}},
		{"MinMax empty", MinMax, nil, nil},

		{"Clamp keeps small differences small, clamps out of range", Clamp, []int64{ToScore(50), ToScore(51.5), ToScore(-80), ToScore(130)}, []int64{50, 51, 0, 100}},

		{"FromBest small differences stay small", FromBest, []int64{ToScore(99.6), ToScore(97.5), ToScore(99.6)}, []int64{100, 98, 100}},
		{"FromBest a link class step keeps its size", FromBest, []int64{ToScore(100), ToScore(88)}, []int64{100, 88}},
		{"FromBest negative ratings are shifted, not clamped", FromBest, []int64{ToScore(-10), ToScore(-30)}, []int64{100, 80}},
		{"FromBest a fallback far below is compressed into the range", FromBest, []int64{ToScore(100), ToScore(50), ToScore(-900)}, []int64{100, 95, 0}},
		{"FromBest all equal", FromBest, []int64{5, 5}, []int64{100, 100}},
		{"FromBest empty", FromBest, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l fwk.NodeScoreList
			for i, s := range tc.in {
				l = append(l, fwk.NodeScore{Name: string(rune('a' + i)), Score: s})
			}
			tc.normalize(l)
			var got []int64
			for _, s := range l {
				got = append(got, s.Score)
			}
			if diff := cmp.Diff(tc.out, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
