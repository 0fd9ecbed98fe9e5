package core

import "errors"

// Errors of a hub under load or fault, matched with errors.Is. The HTTP
// faces answer them with a status that asks the client to come back
// (Retry-After).
var (
	// ErrUnavailable means the store cannot be reached or cannot write for
	// now (a database outage, a failover): nothing was done, and the same
	// request may succeed later.
	ErrUnavailable = errors.New("store unavailable")
	// ErrOverloaded means the hub holds as much in memory as its budget
	// allows (--memory-budget): nothing was done; retry shortly.
	ErrOverloaded = errors.New("hub over its memory budget")
)
