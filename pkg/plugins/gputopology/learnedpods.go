package gputopology

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// learnedPods are the pods counted in the learned workload, so that a pod
// is counted once: one scheduled again after its PreBind wrote some of its
// claims, after its binding conditions failed or after its Bind failed
// keeps the count of its first attempt, whatever its retry allocates (all
// of it, part of it, or nothing, its claims being allocated).
type learnedPods struct {
	mu   sync.Mutex
	pods map[types.UID]bool
}

// maxLearnedPods bounds the set; past it, it starts again. Bound pods are
// never scheduled again, so losing them costs nothing; a pod being
// retried just then may be counted twice.
const maxLearnedPods = 1 << 16

// add records the pod, and reports whether it was not counted yet.
func (l *learnedPods) add(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pods[uid] {
		return false
	}
	if l.pods == nil || len(l.pods) >= maxLearnedPods {
		l.pods = map[types.UID]bool{}
	}
	l.pods[uid] = true
	return true
}

// remove forgets the pod: its count was taken back.
func (l *learnedPods) remove(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pods, uid)
}
