package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/manifests"
)

// CreateDeviceClasses creates the DeviceClasses the manifests install
// with the extended-resource overlay (manifests/scheduler/extended-resource:
// the whole-GPU class also serves resources.limits nvidia.com/gpu);
// classes that exist are kept.
func CreateDeviceClasses(ctx context.Context, client kubernetes.Interface) error {
	var overlay resourceapi.DeviceClass
	if err := yaml.UnmarshalStrict(manifests.ExtendedResourcePatch, &overlay); err != nil {
		return fmt.Errorf("extended resource overlay: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests.DeviceClasses), 4096)
	for {
		var dc resourceapi.DeviceClass
		if err := dec.Decode(&dc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("device classes: %w", err)
		}
		if dc.Name == "" {
			continue
		}
		if dc.Name == overlay.Name {
			dc.Spec.ExtendedResourceName = overlay.Spec.ExtendedResourceName
		}
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("device class %s: %w", dc.Name, err)
		}
	}
}
