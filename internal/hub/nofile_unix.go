//go:build unix

package hub

import "syscall"

// openFileLimit is the process's limit on open descriptors (the soft
// limit, which Go raises to the hard one at start-up), or 0 when unknown.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}
