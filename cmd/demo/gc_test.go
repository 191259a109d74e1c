package main

import (
	"bufio"
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
			got, err := memTotal(bufio.NewScanner(strings.NewReader(tc.meminfo)))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("memTotal = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
