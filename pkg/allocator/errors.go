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
	// this only affects the node. The text names the pool, slice and device.
	ErrInvalidPool = errors.New("invalid resource pool")

	// ErrInvalidInput wraps errors caused by objects that no node can
	// satisfy: a missing DeviceClass, a CEL selector that fails to compile
	// or evaluate, an unsupported request. The scheduler should stop trying
	// other nodes and report it on the pod.
	ErrInvalidInput = errors.New("invalid input")
)
