package allocator

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// bareNode measures a pod without claims on a node that no slice reaches.
// There is nothing to take and no GPU to strand, so every such node gets
// the same result whatever its CPU and memory, but for the pod's own
// request that the result names: it is found once per session and shared
// by the nodes whose pod request matches (in the scheduler a session is
// one pod's; a node that reports no CPU or memory gets a copy naming
// none). As in Allocate, a done context gets the search's error, not the
// remembered result. The solution memo would miss on these
// nodes, as its key holds each node's CPU and memory, and on a fleet of
// mostly CPU nodes the measurement of every one of them dominated Filter.
func (s *Session) bareNode(ctx context.Context, node *v1.Node, view *nodeView, host *HostUse) (*Result, error) {
	bare := s.bare.Load()
	if bare == nil || ctx.Err() != nil {
		r, err := s.newRun(ctx, node, view, newSelection(ctx, s, node, view))
		if err != nil {
			return nil, err
		}
		r.host = host
		if bare, err = r.solve(); err != nil {
			return nil, err
		}
		s.bare.Store(bare)
	}
	cpu, mem := host.podRequest()
	if bare.Quality.Request.CPUMilli == cpu && bare.Quality.Request.MemoryMiB == mem {
		return bare, nil
	}
	res := *bare
	res.Quality.Request.CPUMilli, res.Quality.Request.MemoryMiB = cpu, mem
	return &res, nil
}
