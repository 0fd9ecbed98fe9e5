//go:build !unix

package hub

// openFileLimit is unknown on this platform.
func openFileLimit() uint64 { return 0 }
