package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/controller/volume/persistentvolume"
	"k8s.io/utils/ptr"
)

// startVolumeController runs kube-controller-manager's PersistentVolume
// controller, which completes the PV/PVC binding the scheduler starts
// for WaitForFirstConsumer volumes.
func (c *cluster) startVolumeController() {
	c.t.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	factory := informers.NewSharedInformerFactory(c.client, 0)
	ctrl, err := persistentvolume.NewController(ctx, persistentvolume.ControllerParameters{
		KubeClient:     c.client,
		SyncPeriod:     time.Second,
		VolumeInformer: factory.Core().V1().PersistentVolumes(),
		ClaimInformer:  factory.Core().V1().PersistentVolumeClaims(),
		ClassInformer:  factory.Storage().V1().StorageClasses(),
		PodInformer:    factory.Core().V1().Pods(),
		NodeInformer:   factory.Core().V1().Nodes(),
	})
	if err != nil {
		cancel()
		c.t.Fatalf("persistentvolume controller: %v", err)
	}
	factory.Start(ctx.Done())
	go ctrl.Run(ctx)
	c.t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
}

// localPV is a local volume on node of the WaitForFirstConsumer class.
func localPV(name, class, node string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/data"}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// A GPU pod with a WaitForFirstConsumer volume, scheduled by each profile
// of the "replace kube-scheduler" install under the manifests' role: the
// node must have both the volume and the GPUs, the scheduler binds the
// volume (PV and PVC updates, system:volume-scheduler's grants) and the
// PersistentVolume controller completes it before the pod binds.
func TestVolumeBindingWithGPUs(t *testing.T) {
	c := startCluster(t)
	c.deviceClasses()
	c.startVolumeController()
	const ns, class = "default", "local-wffc"
	c.create(&storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	})
	c.create(gpuTemplate(ns, "tp2", "gpu.nvidia.com", 2))
	profiles := map[string]string{"gputopo": "gputopo-scheduler", "intree": "default-scheduler"}
	for who := range profiles {
		for _, n := range []string{"a", "b"} {
			node := fmt.Sprintf("%s-%s", who, n)
			c.node(node, nil)
			c.create(pairNode(node))
		}
		// Only node b has the volume.
		c.create(localPV("pv-"+who, class, who+"-b"))
		c.create(&v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + who},
			Spec: v1.PersistentVolumeClaimSpec{
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				StorageClassName: ptr.To(class),
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		})
	}
	c.startScheduler()
	for who, sched := range profiles {
		pod := podWithTemplate(ns, "train-"+who, "tp2", sched)
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{who + "-a", who + "-b"}}}}},
		}}}
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + who}}})
		c.create(pod)
	}
	for who := range profiles {
		pod := c.waitScheduled(ns, "train-"+who)["train-"+who]
		if want := who + "-b"; pod.Spec.NodeName != want {
			t.Errorf("%s: pod on %s, want %s (the only node with the volume)", who, pod.Spec.NodeName, want)
		}
		pvc, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(c.ctx, "data-"+who, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pvc.Spec.VolumeName != "pv-"+who || pvc.Status.Phase != v1.ClaimBound {
			t.Errorf("%s: PVC bound to %q (%s), want pv-%s", who, pvc.Spec.VolumeName, pvc.Status.Phase, who)
		}
		if devs := c.devicesByPod(ns)["train-"+who]; len(devs) != 2 {
			t.Errorf("%s: devices %v, want 2 GPUs", who, devs)
		}
	}
	c.checkNoDoubleBooking()
}
