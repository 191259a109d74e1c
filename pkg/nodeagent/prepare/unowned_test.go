package prepare_test

import (
	"context"
	"testing"
	"time"

	"github.com/gputopo/gputopo/pkg/nodeagent/config"
	"github.com/gputopo/gputopo/pkg/nodeagent/discovery"
)

// Unowned lists while no claim is unprepared: an unprepare that would
// destroy a listed instance, and forget its claim, waits until the list
// is judged, so the claim's instance is never reported as another's.
func TestUnownedListsWhileNoClaimIsUnprepared(t *testing.T) {
	n := newNode(t, config.MIG)
	ctx := context.Background()
	if _, err := n.p.Prepare(ctx, claim("a").device("gpu-0-mig-3g40gb-4").obj()); err != nil {
		t.Fatal(err)
	}
	uuid := n.layout.Devices[0].GPU.UUID
	instances, err := discovery.MIGInstances(n.lib.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	listed, release := make(chan struct{}), make(chan struct{})
	result := make(chan []discovery.MIGInstance)
	go func() {
		others, err := n.p.Unowned(uuid, func() ([]discovery.MIGInstance, error) {
			close(listed)
			<-release
			return instances, nil
		})
		if err != nil {
			t.Error(err)
		}
		result <- others
	}()
	<-listed
	unprepared := make(chan error)
	go func() { unprepared <- n.p.Unprepare(ctx, "uid-a") }()
	select {
	case err := <-unprepared:
		t.Fatalf("unprepare (%v) ran while the instances were being listed", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if others := <-result; len(others) != 0 || len(instances) != 1 {
		t.Errorf("listed %v, of them others' %v; want the claim's one instance, not another's", instances, others)
	}
	if err := <-unprepared; err != nil || n.gpuInstances(0) != 0 {
		t.Errorf("unprepare after the list: %v, %d instances left", err, n.gpuInstances(0))
	}
}
