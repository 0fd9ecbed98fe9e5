package proctest

import "syscall"

// sysProcAttr starts a child in its own process group (so Kill ends its
// children too) and has the kernel kill it when the test binary dies.
//
// Pdeathsig fires when the thread that started the child ends; Go keeps
// its threads for the life of the process (unless a goroutine locked to
// one exits), so in practice it fires when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
