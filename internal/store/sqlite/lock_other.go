//go:build !unix

package sqlite

// lockDir does nothing where flock is not available: there, keep to one
// process per data directory by hand.
func lockDir(string) (func(), error) { return func() {}, nil }
