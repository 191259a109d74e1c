package discovery

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reports nvmlNvlinkVersion_t codes, not generations: H100's NVLink
// 4.0 is code 6, and read as a generation it would double its bandwidth.
func TestLinkGBpsReadsNVMLVersionCodes(t *testing.T) {
	tests := []struct {
		version nvml.NvlinkVersion
		gpu     string
		links   int64
		total   int64
	}{
		{nvml.NVLINK_VERSION_2_0, "V100", 6, 300},
		{nvml.NVLINK_VERSION_3_0, "A100", 12, 600},
		{nvml.NVLINK_VERSION_3_1, "RTX A6000 pair", 4, 112},
		{nvml.NVLINK_VERSION_4_0, "H100 SXM", 18, 900},
		{nvml.NVLINK_VERSION_4_0, "H100 NVL", 12, 600},
		{nvml.NVLINK_VERSION_5_0, "B200", 18, 1800},
		{nvml.NVLINK_VERSION_INVALID, "unknown", 4, 0},
	}
	for _, tc := range tests {
		if got := 2 * tc.links * linkGBps(tc.version); got != tc.total {
			t.Errorf("%s (NVML version code %d, %d links): %d GB/s, want %d", tc.gpu, tc.version, tc.links, got, tc.total)
		}
	}
}
