package main

import (
	"strings"
	"testing"
)

func TestMemTotal(t *testing.T) {
	for _, tc := range []struct {
		name, meminfo string
		want          int64
		wantErr       bool
	}{
		{name: "linux", meminfo: "MemFree:          102400 kB\nMemTotal:       24576000 kB\nSwapTotal: 0 kB\n", want: 24576000 << 10},
		{name: "no MemTotal", meminfo: "MemFree: 102400 kB\nMemAvailable: 204800 kB\n", wantErr: true},
		{name: "other unit", meminfo: "MemTotal: 24 GB\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memTotal(strings.NewReader(tc.meminfo))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("memTotal = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCgroupLimit(t *testing.T) {
	for raw, want := range map[string]int64{"8589934592\n": 8589934592, "max\n": 0, "0\n": 0, "": 0} {
		got, ok := cgroupLimit(raw)
		if ok != (want > 0) || (ok && got != want) {
			t.Errorf("cgroupLimit(%q) = %d, %v; want %d", raw, got, ok, want)
		}
	}
}
