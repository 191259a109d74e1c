package scoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"
)

func TestMinMax(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out []int64
	}{
		{"spread", []int64{ToScore(88), ToScore(100), ToScore(76)}, []int64{50, 100, 0}},
		{"all equal", []int64{5, 5}, []int64{100, 100}},
		{"negative raw", []int64{ToScore(-900), ToScore(100)}, []int64{0, 100}},
		{"empty", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l fwk.NodeScoreList
			for i, s := range tc.in {
				l = append(l, fwk.NodeScore{Name: string(rune('a' + i)), Score: s})
			}
			MinMax(l)
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

func TestClamp(t *testing.T) {
	l := fwk.NodeScoreList{{Name: "a", Score: ToScore(50)}, {Name: "b", Score: ToScore(51.5)}, {Name: "c", Score: ToScore(-80)}, {Name: "d", Score: ToScore(130)}}
	Clamp(l)
	var got []int64
	for _, s := range l {
		got = append(got, s.Score)
	}
	// Small differences stay small (50 vs 51), out-of-range ratings clamp.
	if diff := cmp.Diff([]int64{50, 51, 0, 100}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFromBest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out []int64
	}{
		{"small differences stay small", []int64{ToScore(99.6), ToScore(97.5), ToScore(99.6)}, []int64{100, 98, 100}},
		{"a link class step keeps its size", []int64{ToScore(100), ToScore(88)}, []int64{100, 88}},
		{"negative ratings are shifted, not clamped", []int64{ToScore(-10), ToScore(-30)}, []int64{100, 80}},
		{"a fallback far below is compressed into the range", []int64{ToScore(100), ToScore(50), ToScore(-900)}, []int64{100, 95, 0}},
		{"all equal", []int64{5, 5}, []int64{100, 100}},
		{"empty", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l fwk.NodeScoreList
			for i, s := range tc.in {
				l = append(l, fwk.NodeScore{Name: string(rune('a' + i)), Score: s})
			}
			FromBest(l)
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
