package integration

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// checkNoDoubleBooking scans every claim's status in the API server: no
// device is held exclusively twice, or exclusively and shared; shares fit
// the device's capacity; shared counters (MIG) are never overdrawn.
func (c *cluster) checkNoDoubleBooking() {
	c.t.Helper()
	claims, err := c.client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	slices, err := c.client.ResourceV1().ResourceSlices().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	devices := map[string]*resourceapi.Device{}
	totals := map[string]resource.Quantity{} // pool/set/counter
	for i := range slices.Items {
		s := &slices.Items[i]
		for j := range s.Spec.Devices {
			devices[s.Spec.Driver+"/"+s.Spec.Pool.Name+"/"+s.Spec.Devices[j].Name] = &s.Spec.Devices[j]
		}
		for _, cs := range s.Spec.SharedCounters {
			for n, v := range cs.Counters {
				totals[s.Spec.Pool.Name+"/"+cs.Name+"/"+n] = v.Value
			}
		}
	}
	exclusive := map[string]string{}
	shared := map[string]map[resourceapi.QualifiedName]resource.Quantity{}
	counters := map[string]resource.Quantity{}
	charge := func(pool string, d *resourceapi.Device) {
		for _, cc := range d.ConsumesCounters {
			for n, v := range cc.Counters {
				k := pool + "/" + cc.CounterSet + "/" + n
				q := counters[k]
				q.Add(v.Value)
				counters[k] = q
			}
		}
	}
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			d := devices[id]
			if d == nil {
				c.t.Errorf("claim %s/%s: device %s does not exist", claim.Namespace, claim.Name, id)
				continue
			}
			if r.ShareID != nil {
				if other, ok := exclusive[id]; ok {
					c.t.Errorf("device %s shared by %s and exclusive to %s", id, claim.Name, other)
				}
				if shared[id] == nil {
					shared[id] = map[resourceapi.QualifiedName]resource.Quantity{}
					charge(r.Pool, d)
				}
				for n, v := range r.ConsumedCapacity {
					q := shared[id][n]
					q.Add(v)
					shared[id][n] = q
				}
				continue
			}
			if other, ok := exclusive[id]; ok {
				c.t.Errorf("device %s allocated to both %s and %s/%s", id, other, claim.Namespace, claim.Name)
			}
			if _, ok := shared[id]; ok {
				c.t.Errorf("device %s exclusive to %s but shared", id, claim.Name)
			}
			exclusive[id] = claim.Namespace + "/" + claim.Name
			charge(r.Pool, d)
		}
	}
	for id, used := range shared {
		for n, q := range used {
			if capa := devices[id].Capacity[n].Value; q.Cmp(capa) > 0 {
				c.t.Errorf("device %s: %s shares use %s of %s", id, n, q.String(), capa.String())
			}
		}
	}
	for k, q := range counters {
		if total := totals[k]; q.Cmp(total) > 0 {
			c.t.Errorf("counter %s overdrawn: %s of %s", k, q.String(), total.String())
		}
	}
}

// devicesByPod returns the devices each pod's claims hold.
func (c *cluster) devicesByPod(ns string) map[string][]string {
	c.t.Helper()
	claims, err := c.client.ResourceV1().ResourceClaims(ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, ref := range claim.Status.ReservedFor {
			for _, r := range claim.Status.Allocation.Devices.Results {
				out[ref.Name] = append(out[ref.Name], r.Pool+"/"+r.Device)
			}
		}
	}
	return out
}

func podOn(ns, name, template, scheduler, node string) *v1.Pod {
	p := podWithTemplate(ns, name, template, scheduler)
	if node != "" {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	return p
}

func gpuTemplate(ns, name, class string, count int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}
}

func withSelector(t *resourceapi.ResourceClaimTemplate, expr string) *resourceapi.ResourceClaimTemplate {
	t.Spec.Spec.Devices.Requests[0].Exactly.Selectors = append(t.Spec.Spec.Devices.Requests[0].Exactly.Selectors,
		resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}})
	return t
}

func sharedTemplate(ns, name, memory string) *resourceapi.ResourceClaimTemplate {
	t := gpuTemplate(ns, name, "shared.gpu.nvidia.com", 1)
	t.Spec.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}
	return t
}

func migTemplate(ns, profile string) *resourceapi.ResourceClaimTemplate {
	return withSelector(gpuTemplate(ns, "mig-"+strings.ReplaceAll(profile, ".", ""), "mig.nvidia.com", 1),
		fmt.Sprintf("device.attributes['gpu.nvidia.com'].partitionSize == '%s'", profile))
}

// deviceClasses creates the classes of the manifests.
func (c *cluster) deviceClasses() {
	c.t.Helper()
	c.apply("../../manifests/scheduler/deviceclasses", "")
}
