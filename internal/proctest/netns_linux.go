package proctest

import (
	"fmt"
	"syscall"
	"unsafe"
)

// netnsProcAttr starts a child in a new network namespace, in its own
// process group, dying with the test binary.
func netnsProcAttr() (*syscall.SysProcAttr, error) {
	a := sysProcAttr()
	a.Cloneflags = syscall.CLONE_NEWNET
	return a, nil
}

// loopbackUp brings up the loopback interface of a new network namespace
// (it starts down): the equivalent of `ip link set lo up`.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var req struct { // struct ifreq with ifr_flags
		name  [syscall.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req))); e != 0 {
		return fmt.Errorf("SIOCGIFFLAGS: %w", e)
	}
	req.flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req))); e != 0 {
		return fmt.Errorf("SIOCSIFFLAGS: %w", e)
	}
	return nil
}
