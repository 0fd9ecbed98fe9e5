// Package proctest builds the switchboard binary once per test process and
// runs it (and other programs) as real child processes for integration
// tests, ending exactly the processes it started.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds ./cmd/switchboard (once per test binary) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "switchboard")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/switchboard")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RepoRoot is the module's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Proc is a started child process.
type Proc struct {
	Cmd  *exec.Cmd
	Out  *SafeBuffer
	t    testing.TB
	done chan struct{} // closed once the process has been waited for
}

// SafeBuffer is a bytes.Buffer safe for concurrent writes and reads.
type SafeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SafeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SafeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs name with args in dir; the process is killed when the test ends
// if still running.
func Start(t testing.TB, dir string, env []string, name string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Cmd: cmd, Out: out, t: t, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	return p
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process (and its process group) and waits.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to 10s, then kills.
func (p *Proc) Stop() {
	if p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// FreeAddr returns a free loopback address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitHTTP polls url until it answers 200 or the timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not answer within %v", url, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartHub runs `switchboard serve` with args on addr and waits for /readyz.
func StartHub(t testing.TB, addr string, args ...string) *Proc {
	t.Helper()
	all := append([]string{"serve", "--addr", addr}, args...)
	p := Start(t, t.TempDir(), nil, Binary(t), all...)
	url := "http://" + addr + "/readyz"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			// It will never answer: say why.
			t.Fatalf("switchboard %v exited before it was ready:\n%s", all, p.Out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 20s; output so far:\n%s", url, p.Out.String())
		}
	}
}
