//go:build unix && !linux

package proctest

import (
	"errors"
	"syscall"
)

func netnsProcAttr() (*syscall.SysProcAttr, error) {
	return nil, errors.New("network namespaces are a Linux feature")
}

func loopbackUp() error { return errors.New("network namespaces are a Linux feature") }
