package gputopology

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cgotesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gputopo/gputopo/pkg/contract"
)

// The unit tests of the extension points run the plugin on the parts of
// kube-scheduler it runs on in a cluster: the in-tree DRA manager (claim
// tracker with its assume cache, slice tracker, class lister) fed by
// informers from a fake clientset, and a real framework handle. Only the
// API server is fake.

const ns = "default"

// testEnv is one plugin on a fake API server.
type testEnv struct {
	tCtx   ktesting.TContext
	client *fake.Clientset
	pl     *GPUTopology
	nodes  map[string]fwk.NodeInfo
	state  fwk.CycleState
}

// objects a test starts with.
type objects struct {
	nodes   []*v1.Node
	slices  []*resourceapi.ResourceSlice
	classes []*resourceapi.DeviceClass
	claims  []*resourceapi.ResourceClaim
	pods    []*v1.Pod
}

func newTestEnv(t *testing.T, objs objects) *testEnv {
	tCtx := ktesting.Init(t)
	env := &testEnv{tCtx: tCtx, client: fake.NewClientset(), nodes: map[string]fwk.NodeInfo{}, state: framework.NewCycleState()}
	env.client.PrependReactor("*", "*", versionReactor())
	factory := informers.NewSharedInformerFactory(env.client, 0)
	slices, err := resourceslicetracker.StartTracker(tCtx, resourceslicetracker.Options{
		EnableDeviceTaintRules: true,
		SliceInformer:          factory.Resource().V1().ResourceSlices(),
		TaintInformer:          factory.Resource().V1().DeviceTaintRules(),
		KubeClient:             env.client,
	})
	tCtx.ExpectNoError(err, "slice tracker")
	claims := assumecache.NewAssumeCache(tCtx.Logger(), factory.Resource().V1().ResourceClaims().Informer(), "resource claim", "", nil)
	draManager := dynamicresources.NewDRAManager(tCtx, claims, slices, factory)
	// As the scheduler does: the extended-resource cache follows the
	// DeviceClass informer (DRAExtendedResource).
	classes, err := factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(draManager.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache))
	tCtx.ExpectNoError(err, "extended resource cache")
	synced := []cache.DoneChecker{slices.HasSyncedChecker(), claims.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSyncedChecker(), classes.HasSyncedChecker()}
	fh, err := runtime.NewFramework(tCtx, nil, nil,
		runtime.WithClientSet(env.client),
		runtime.WithInformerFactory(factory),
		runtime.WithEventRecorder(&events.FakeRecorder{}),
		runtime.WithSharedDRAManager(draManager),
		runtime.WithSnapshotSharedLister(schedcache.NewSnapshot(nil, objs.nodes)),
	)
	tCtx.ExpectNoError(err, "framework")
	pl, err := New(tCtx, nil, fh, defaultGates())
	tCtx.ExpectNoError(err, "plugin")
	env.pl = pl.(*GPUTopology)

	for _, o := range objs.slices {
		_, err = env.client.ResourceV1().ResourceSlices().Create(tCtx, o, metav1.CreateOptions{})
		tCtx.ExpectNoError(err, "create slice")
	}
	for _, o := range objs.classes {
		_, err = env.client.ResourceV1().DeviceClasses().Create(tCtx, o, metav1.CreateOptions{})
		tCtx.ExpectNoError(err, "create class")
	}
	for _, o := range objs.claims {
		_, err = env.client.ResourceV1().ResourceClaims(o.Namespace).Create(tCtx, o, metav1.CreateOptions{})
		tCtx.ExpectNoError(err, "create claim")
	}
	for _, o := range objs.pods {
		_, err = env.client.CoreV1().Pods(o.Namespace).Create(tCtx, o, metav1.CreateOptions{})
		tCtx.ExpectNoError(err, "create pod")
	}
	factory.Start(tCtx.Done())
	tCtx.Cleanup(func() {
		tCtx.Cancel("test is done")
		factory.Shutdown()
		runtime.WaitForShutdown(fh)
	})
	factory.WaitForCacheSync(tCtx.Done())
	cache.WaitFor(tCtx, "event handlers", synced...)
	for _, n := range objs.nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		env.nodes[n.Name] = ni
	}
	return env
}

// versionReactor gives created objects a UID (and a name from
// generateName) and every write a new resourceVersion, as the API server
// does; the assume cache compares them.
func versionReactor() cgotesting.ReactionFunc {
	var mu sync.Mutex
	var version, uid int
	return func(action cgotesting.Action) (bool, apiruntime.Object, error) {
		// UpdateAction has CreateAction's methods: one case serves both.
		a, ok := action.(cgotesting.CreateAction)
		if !ok || (action.GetVerb() != "create" && action.GetVerb() != "update") {
			return false, nil, nil
		}
		m, ok := a.GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if action.GetVerb() == "create" && m.GetUID() == "" {
			uid++
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", uid)))
		}
		if action.GetVerb() == "create" && m.GetName() == "" && m.GetGenerateName() != "" {
			m.SetName(fmt.Sprintf("%s%05d", m.GetGenerateName(), uid))
		}
		version++
		m.SetResourceVersion(strconv.Itoa(version))
		return false, nil, nil
	}
}

// refuseStaleClaimUpdates makes the fake API server refuse, as the real one
// does, an update of a claim whose resourceVersion is not the stored one.
func (e *testEnv) refuseStaleClaimUpdates() {
	gvr := resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	e.client.PrependReactor("update", "resourceclaims", func(a cgotesting.Action) (bool, apiruntime.Object, error) {
		obj := a.(cgotesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim)
		if stored, err := e.client.Tracker().Get(gvr, obj.Namespace, obj.Name); err == nil && stored.(*resourceapi.ResourceClaim).ResourceVersion != obj.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), obj.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
}

// storedClaim reads a claim back from the fake API server.
func (e *testEnv) storedClaim(name string) *resourceapi.ResourceClaim {
	e.tCtx.Helper()
	c, err := e.client.ResourceV1().ResourceClaims(ns).Get(e.tCtx, name, metav1.GetOptions{})
	e.tCtx.ExpectNoError(err, "get claim")
	return c
}

// Builders of the test's objects.

var gpuClass = &resourceapi.DeviceClass{
	ObjectMeta: metav1.ObjectMeta{Name: contract.ClassGPU},
	Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.driver == %q", contract.DefaultDriver)}}}},
}

func node(name string) *v1.Node {
	return st.MakeNode().Name(name).Label("kubernetes.io/hostname", name).Obj()
}

// pairSlice: GPUs in NVLink pairs (gpu-0 with gpu-2, gpu-1 with gpu-3),
// in PCI order that interleaves the pairs.
func pairSlice(nodeName string, gpus int) *resourceapi.ResourceSlice {
	return gpuSlice(nodeName, gpus, func(i int) string { return fmt.Sprintf("pair-%d", i%2) })
}

// pcieSlice: GPUs with no link between them but the host.
func pcieSlice(nodeName string, gpus int) *resourceapi.ResourceSlice {
	return gpuSlice(nodeName, gpus, func(int) string { return "" })
}

// gpuSlice publishes gpus GPUs on nodeName, GPU i in NVLink domain
// domain(i) (none when empty).
func gpuSlice(nodeName string, gpus int, domain func(i int) string) *resourceapi.ResourceSlice {
	w := st.MakeResourceSlice(nodeName, contract.DefaultDriver)
	for i := range gpus {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			contract.AttrType: {StringValue: ptr.To(contract.TypeGPU)},
			contract.AttrUUID: {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", nodeName, i))},
		}
		if d := domain(i); d != "" {
			attrs[contract.AttrNVLinkDomain] = resourceapi.DeviceAttribute{StringValue: ptr.To(d)}
		}
		w.Device(fmt.Sprintf("gpu-%d", i), attrs)
	}
	return w.Obj()
}

func claim(name string, gpus int64) *st.ResourceClaimWrapper {
	return st.MakeResourceClaim().Name(name).Namespace(ns).RequestWithNameCount("gpus", contract.ClassGPU, gpus)
}

func podWithClaims(name string, claims ...string) *v1.Pod {
	w := st.MakePod().Name(name).Namespace(ns).UID("uid-pod-" + name)
	for _, c := range claims {
		w.PodResourceClaims(v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return w.Obj()
}

// allocatedOn is an allocation of devices of nodeName's pool.
func allocatedOn(nodeName string, devices ...string) *resourceapi.AllocationResult {
	a := &resourceapi.AllocationResult{NodeSelector: st.MakeNodeSelector().In("kubernetes.io/hostname", []string{nodeName}, st.NodeSelectorTypeMatchExpressions).Obj()}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: contract.DefaultDriver, Pool: nodeName, Device: d})
	}
	return a
}
