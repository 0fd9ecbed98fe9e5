//go:build !unix

package amp

import (
	"os"
	"sync"
)

// processLock serialises Updates within the process where flock is not
// available; cross-process safety is then not guaranteed.
var processLock sync.Mutex

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	processLock.Lock()
	return func() {
		processLock.Unlock()
		f.Close()
	}, nil
}
