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
