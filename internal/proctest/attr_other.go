//go:build unix && !linux

package proctest

import "syscall"

// sysProcAttr starts a child in its own process group, so Kill ends its
// children too. Outside Linux there is no Pdeathsig: a child outlives a
// test binary killed with SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
