package proctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// netnsEnv marks the child test process PrivateNetwork started inside its
// own network namespace.
const netnsEnv = "SWITCHBOARD_TEST_PRIVATE_NETWORK"

// NoNetnsEnv, set to anything, makes PrivateNetwork use the machine's
// network (with the lock) even where it could make a namespace.
const NoNetnsEnv = "SWITCHBOARD_TEST_NO_NETNS"

// Network says where a test that needs fixed ports runs; see
// PrivateNetwork.
type Network int

const (
	// RanInChild: the test ran in a child process in a private network
	// namespace and its result is already reported; return at once.
	RanInChild Network = iota
	// Private: this process is that child; the fixed ports are its own.
	Private
	// Shared: no namespace could be made; the test runs on the
	// machine's network, holding the machine-wide lock on its ports.
	Shared
)

// PrivateNetwork lets a test use fixed ports (for programs that hard-code
// them) without colliding with anything else on the machine. Where the
// machine allows it (Linux, as root or with CAP_SYS_ADMIN) it runs the
// calling test again, in a child process inside a new network namespace
// with only its loopback interface up, reports the child's output and
// result, and returns RanInChild. In that child it returns Private. Where
// no namespace can be made it falls back to the machine's network: it
// takes a lock file shared by every test run on the machine (waiting for
// another run to finish), checks that each of ports is free on 127.0.0.1,
// failing with a clear message when one is taken, and returns Shared.
//
// Processes the test starts inherit the namespace. Call it first in the
// test, before starting anything:
//
//	if proctest.PrivateNetwork(t, 8001, 8002) == proctest.RanInChild {
//		return
//	}
func PrivateNetwork(t *testing.T, ports ...int) Network {
	t.Helper()
	if os.Getenv(netnsEnv) != "" {
		if err := loopbackUp(); err != nil {
			t.Fatalf("private network: bring up the loopback interface: %v", err)
		}
		return Private
	}
	err := errors.New(NoNetnsEnv + " is set")
	if os.Getenv(NoNetnsEnv) == "" {
		bin := Binary(t) // built outside: the namespace has no network at all
		if err = rerunInNetns(t, bin); err == nil {
			return RanInChild
		}
	}
	t.Logf("no private network namespace (%v); using the machine's network with a lock on ports %v", err, ports)
	lockPorts(t, ports)
	return Shared
}

// errNoNetns is returned by rerunInNetns when the child could not start.
var errNoNetns = errors.New("cannot create a network namespace")

// rerunInNetns runs the current test in a child test process in a new
// network namespace. It returns errNoNetns (wrapped) when the namespace
// cannot be made, and nil once the child ran (failing t if it failed).
func rerunInNetns(t *testing.T, bin string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: %v", errNoNetns, err)
	}
	attr, err := netnsProcAttr()
	if err != nil {
		return fmt.Errorf("%w: %v", errNoNetns, err)
	}
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-2*time.Second))
		defer cancel()
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v", "-test.count=1"}
	if dl, ok := t.Deadline(); ok {
		args = append(args, fmt.Sprintf("-test.timeout=%v", time.Until(dl).Round(time.Second)))
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1", BinaryEnv+"="+bin)
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: %v", errNoNetns, err)
	}
	err = cmd.Wait()
	t.Logf("ran in a private network namespace (child test process %d):\n%s", cmd.Process.Pid, indent(out.String()))
	if err != nil {
		t.Fatalf("the test in its private network namespace failed: %v", err)
	}
	if strings.Contains(out.String(), "--- SKIP") {
		t.Skip("skipped in the private network namespace")
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// lockPorts takes the machine-wide lock for tests on fixed ports (held
// until the test ends) and fails the test if one of ports is in use.
func lockPorts(t *testing.T, ports []int) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "switchboard-fixed-ports.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("fixed ports lock %s: %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	waitfor.OKWithin(t, 10*time.Minute, "the lock on the fixed ports, "+path+" (another test run holds it)", func() error {
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	})
	for _, p := range ports {
		if err := portFree(p); err != nil {
			t.Fatalf("port %d on 127.0.0.1 is taken by a program that is not a Switchboard test run (those hold %s): %v; "+
				"this test's unmodified third-party clients need it, and no network namespace could be made to keep them apart (run as root on Linux)", p, path, err)
		}
	}
}

// portFree reports why 127.0.0.1:port cannot be listened on, if it cannot.
func portFree(port int) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return ln.Close()
}
