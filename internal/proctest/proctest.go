// Package proctest runs real child processes for integration tests — the
// switchboard binary (built once per test binary) and other programs —
// and makes sure they end with the test:
//
//   - a process started with Start (or StartHub) is killed, with its
//     process group, when the test ends;
//   - every child is started so that it also dies when the test binary
//     dies, whatever the cause (Ctrl-C, go test's -timeout, kill -9): on
//     Linux with Pdeathsig, and in its own process group so Kill ends its
//     children too;
//   - Command is exec.CommandContext with the same guarantees, for
//     programs a test runs to completion.
//
// Servers listen on a port they choose: StartHub passes --addr
// 127.0.0.1:0 and reads the bound address from the hub's log, so no two
// tests (or two runs of the suite) can collide on a port.
//
// Wait for a process with the waitfor package's helpers or Proc.WaitOutput,
// never with time.Sleep.
//
// Tests that run the switchboard binary are full-lane: Binary skips them
// under go test -short.
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// BinaryEnv names an already built switchboard binary for Binary to use
// instead of building one (a test re-executing itself passes its binary
// on this way).
const BinaryEnv = "SWITCHBOARD_TEST_BINARY"

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// Binary builds ./cmd/switchboard (once per test binary) and returns its
// path. The build lives in a temporary directory that Main removes when
// the tests end; one left behind by a test binary that was killed is
// removed by the next Binary call on the machine.
//
// Tests of the real binary belong to the full lane: under go test -short,
// Binary (and so StartHub) skips the test.
func Binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the switchboard binary: full lane, not with -short")
	}
	buildOnce.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			binPath = p
			return
		}
		sweepStaleBinaries()
		dir, err := os.MkdirTemp("", fmt.Sprintf("switchboard-bin-%d-", os.Getpid()))
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
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

// Main runs the tests and then removes what Binary built. Use it as the
// package's TestMain:
//
//	func TestMain(m *testing.M) { proctest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sweepStaleBinaries removes build directories of test binaries that are
// no longer running.
func sweepStaleBinaries() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "switchboard-bin-*"))
	for _, d := range dirs {
		f := strings.SplitN(filepath.Base(d), "-", 4) // switchboard, bin, pid, random
		if len(f) < 4 {
			continue
		}
		pid, err := strconv.Atoi(f[2])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// RepoRoot is the module's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Proc is a started child process.
type Proc struct {
	Cmd *exec.Cmd
	Out *SafeBuffer // its stdout and stderr
	// Addr and URL are where a hub started by StartHub listens
	// ("127.0.0.1:PORT", "http://127.0.0.1:PORT").
	Addr, URL string
	done      chan struct{} // closed once the process has been waited for
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

// Start runs name with args in dir, with env added to the test's
// environment. The process is killed (with its process group) when the
// test ends if it is still running, and dies with the test binary.
func Start(t testing.TB, dir string, env []string, name string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Cmd: cmd, Out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

// Command is exec.CommandContext for a program a test runs to completion:
// the program dies with the test binary, and when ctx ends its whole
// process group is killed (and Wait gives up on its output 5 s later).
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
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

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the process and its process group, and waits for
// it to end.
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

// WaitOutput waits until the process has written s, and fails the test
// (with the output so far) when it ends or the wait times out first.
func (p *Proc) WaitOutput(t testing.TB, s string) {
	t.Helper()
	waitfor.OK(t, fmt.Sprintf("%s to print %q", filepath.Base(p.Cmd.Path), s), func() error {
		if strings.Contains(p.Out.String(), s) {
			return nil
		}
		if p.Exited() {
			t.Fatalf("%s ended before printing %q:\n%s", filepath.Base(p.Cmd.Path), s, p.Out.String())
		}
		return fmt.Errorf("output so far:\n%s", p.Out.String())
	})
}

// FreeAddr returns a loopback address that was free a moment ago. Another
// process may take it before the caller listens on it: use it only for a
// program that cannot listen on port 0 and tell its port (and prefer
// StartHub's own choice for hubs).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitHTTP waits until url answers 200, for at most timeout.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	waitfor.OKWithin(t, timeout, url+" to answer 200", func() error { return get200(url) })
}

func get200(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// StartHub runs `switchboard serve --addr addr args...` and waits for its
// /readyz. With addr "127.0.0.1:0" (or "") the hub chooses a free port and
// the address comes from its "switchboard listening" log line; either way
// the returned Proc's Addr and URL say where it listens. A hub that exits
// before it is ready fails the test with its output, which says why (a
// port already in use, say).
//
// The hub runs without its request log (--request-log=false), so that its
// output — which a failing test prints — holds what the hub said at
// startup, its audit records, warnings and errors rather than one line per
// request; args with a --request-log or --log-level flag of their own
// decide instead.
func StartHub(t testing.TB, addr string, args ...string) *Proc {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	all := append([]string{"serve", "--addr", addr}, args...)
	if !hasFlag(args, "--request-log", "--log-level") {
		all = append(all, "--request-log=false")
	}
	p := Start(t, t.TempDir(), nil, Binary(t), all...)
	waitfor.OKWithin(t, 60*time.Second, fmt.Sprintf("switchboard %v to be ready", all), func() error {
		if p.Exited() {
			t.Fatalf("switchboard %v exited before it was ready:\n%s", all, p.Out.String())
		}
		if p.Addr == "" {
			a, ok := listeningAddr(p.Out.String())
			if !ok {
				return errors.New(`no "switchboard listening" line yet`)
			}
			p.Addr, p.URL = a, "http://"+a
		}
		if err := get200(p.URL + "/readyz"); err != nil {
			return fmt.Errorf("%s/readyz: %v; output so far:\n%s", p.URL, err, p.Out.String())
		}
		return nil
	})
	return p
}

// hasFlag reports whether args hold one of the flags names, as "--name",
// "--name=value", or with one dash.
func hasFlag(args []string, names ...string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, n := range names {
			a, n := strings.TrimLeft(a, "-"), strings.TrimLeft(n, "-")
			if a == n || strings.HasPrefix(a, n+"=") {
				return true
			}
		}
	}
	return false
}

// listeningAddr finds the address in the hub's JSON log line
// {"msg":"switchboard listening","addr":"127.0.0.1:PORT",…}.
func listeningAddr(out string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "switchboard listening" && line.Addr != "" {
			return line.Addr, true
		}
	}
	return "", false
}

// RefusedAddr returns a loopback address that refuses connections for as
// long as the test runs: a socket bound to a free port but not listening,
// held until the test ends, so no other process can take the port and
// answer (as one could on an address FreeAddr returned).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
