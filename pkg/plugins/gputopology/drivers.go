package gputopology

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// ownSlices are the slices of the drivers this profile allocates
// (GPUTopologyArgs.drivers; all when none are listed). Another driver's
// devices are left to the scheduler that allocates them: in gputopo's
// second-scheduler install the API server refuses gputopo's allocations
// of them, and by then PreBind may have written the pod's other claims,
// whose devices would stay allocated with no pod to use them.
func (pl *GPUTopology) ownSlices(all []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	if len(pl.args.Drivers) == 0 {
		return all
	}
	own := make([]*resourceapi.ResourceSlice, 0, len(all))
	for _, s := range all {
		if slices.Contains(pl.args.Drivers, s.Spec.Driver) {
			own = append(own, s)
		}
	}
	return own
}

// driverSelector matches a CEL selector that admits the devices of one
// driver only: `device.driver == "NAME"`, alone or and-ed with more over
// any number of lines (no || or ?: anywhere, so nothing can widen it).
var driverSelector = regexp.MustCompile(`(?s)^\s*device\.driver\s*==\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*(?:&&.*)?$`)

// PinnedDriver is the driver whose devices alone the class admits, as
// its selectors say plainly; "" when they do not.
func PinnedDriver(class *resourceapi.DeviceClass) string {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil || strings.ContainsAny(sel.CEL.Expression, "|?") {
			continue
		}
		if m := driverSelector.FindStringSubmatch(sel.CEL.Expression); m != nil {
			return m[1] + m[2]
		}
	}
	return ""
}

// foreignClass returns the driver of the class's devices when it is one
// this profile does not allocate, else "".
func (pl *GPUTopology) foreignClass(className string) string {
	if len(pl.args.Drivers) == 0 {
		return ""
	}
	class, err := pl.draManager.DeviceClasses().Get(className)
	if err != nil {
		return "" // checkClasses reports it
	}
	if d := PinnedDriver(class); d != "" && !slices.Contains(pl.args.Drivers, d) {
		return d
	}
	return ""
}

// checkDrivers refuses a claim with a request that only another driver's
// devices can serve: every node would fail it with "0 match" otherwise.
func (pl *GPUTopology) checkDrivers(claim *resourceapi.ResourceClaim) *fwk.Status {
	for _, r := range claim.Spec.Devices.Requests {
		if driver := pl.foreignRequest(r); driver != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"resourceclaim %s, request %s: its device class selects devices of driver %s, which this scheduler leaves to others (it allocates those of %s): use a scheduler that allocates %s",
				klog.KObj(claim), r.Name, driver, strings.Join(pl.args.Drivers, ", "), driver))
		}
	}
	return nil
}

// foreignRequest returns the driver of another scheduler's devices that
// the request's class pins it to, or, for a request with alternatives
// (firstAvailable), that of the last when every one is pinned to one; ""
// when some alternative may be served here.
func (pl *GPUTopology) foreignRequest(r resourceapi.DeviceRequest) string {
	classes := make([]string, 0, 1+len(r.FirstAvailable))
	if r.Exactly != nil {
		classes = append(classes, r.Exactly.DeviceClassName)
	}
	for _, sub := range r.FirstAvailable {
		classes = append(classes, sub.DeviceClassName)
	}
	driver := ""
	for _, c := range classes {
		if driver = pl.foreignClass(c); driver == "" {
			return ""
		}
	}
	return driver
}
