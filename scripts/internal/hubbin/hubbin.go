// Package hubbin runs the switchboard binary for the scripts that measure
// it: the -bin flag and its default build, a loopback address, the hub's
// start and its wait for /readyz.
package hubbin

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// BinFlag defines the -bin flag on the command line's flag set: a
// switchboard binary to run; empty, Build builds one.
func BinFlag() *string {
	return flag.String("bin", "", "switchboard binary (default: go build ./cmd/switchboard)")
}

// Build returns bin, or when bin is empty a switchboard binary it builds
// from ./cmd/switchboard (run from the repository's root) into dir.
func Build(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "switchboard")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/switchboard").CombinedOutput(); err != nil {
		return "", fmt.Errorf("hubbin: build: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a hub that takes its address as a flag.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("hubbin: free address: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Hub is a started `switchboard serve`.
type Hub struct {
	Cmd *exec.Cmd
	// Base is its base URL (http://addr).
	Base string

	exited  chan struct{} // closed when the process has ended (nil: not started here)
	waitErr error         // how it ended; read after exited is closed
}

// Start starts `bin serve --dev --addr addr` with args after those, its
// log on this process's stderr. Stop it with Stop.
func Start(bin, addr string, args ...string) (*Hub, error) {
	return StartLogging(os.Stderr, bin, addr, args...)
}

// StartLogging is Start with the hub's output (its log) written to w.
func StartLogging(w io.Writer, bin, addr string, args ...string) (*Hub, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--dev", "--addr", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("hubbin: start the hub: %w", err)
	}
	h := &Hub{Cmd: cmd, Base: "http://" + addr, exited: make(chan struct{})}
	go func() { h.waitErr = cmd.Wait(); close(h.exited) }()
	return h, nil
}

// ErrExited is returned by WaitReady when the hub's process ended before
// it became ready (a flag it refused, a port taken, a damaged store).
var ErrExited = errors.New("hubbin: the hub exited")

// askClient asks /readyz: a hub that accepts connections but does not
// answer (stopped, or not a hub) must not hold WaitReady past its limit.
var askClient = &http.Client{Timeout: 2 * time.Second}

// ErrNotReady is returned by WaitReady when the hub's /readyz did not
// answer 200 in time.
var ErrNotReady = errors.New("hubbin: the hub did not become ready")

// WaitReady asks the hub's /readyz every poll until it answers 200, or
// returns ErrNotReady after limit, or ErrExited as soon as the process
// has ended.
func (h *Hub) WaitReady(poll, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-h.exited: // never ready on a nil channel
			return fmt.Errorf("%w before it was ready: %v", ErrExited, h.waitErr)
		default:
		}
		if resp, err := askClient.Get(h.Base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %v", ErrNotReady, limit)
		}
		select {
		case <-h.exited:
		case <-time.After(poll):
		}
	}
}

// Stop kills the hub and waits for it to end.
func (h *Hub) Stop() {
	_ = h.Cmd.Process.Kill()
	<-h.exited
}
