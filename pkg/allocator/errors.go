package allocator

import "errors"

var (
	// ErrUnsatisfiable wraps every error that says the claims cannot be
	// allocated on one node right now (devices in use, no match, pool
	// incomplete). Other nodes may still fit; the error text says why this
	// one does not.
	ErrUnsatisfiable = errors.New("unsatisfiable")

	// ErrInvalidPool wraps the error returned when no allocation was found
	// and at least one resource pool visible to the node is malformed
	// (duplicate device names, unknown counter sets, ...). Like upstream,
	// this only affects the node. The error is an *InvalidPoolError.
	ErrInvalidPool = errors.New("invalid resource pool")

	// ErrInvalidInput wraps errors caused by objects that no node can
	// satisfy: a missing DeviceClass, a CEL selector that fails to compile
	// or evaluate, an unsupported request. The scheduler should stop trying
	// other nodes and report it on the pod.
	ErrInvalidInput = errors.New("invalid input")
)

// InvalidPoolError says that a pool the node sees is malformed. Its text
// says what is wrong in the same words on every node, as upstream's fixed
// "invalid resource pools were encountered" does: the scheduler sums up
// the nodes' reasons by text, and a reason naming each node's own pool
// would make the pod's status grow with the fleet (a driver that
// publishes duplicate device names does so on every node). Pool and
// Detail name the pool, slices and devices, for the log.
type InvalidPoolError struct {
	Pool, Kind, Detail string
}

func (e *InvalidPoolError) Error() string { return ErrInvalidPool.Error() + ": " + e.Kind }

func (e *InvalidPoolError) Unwrap() error { return ErrInvalidPool }
