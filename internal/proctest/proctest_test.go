package proctest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// helperEnv makes the test binary act as a test's process that starts a
// child and then waits to be killed (see TestChildrenDieWithTheTest).
const helperEnv = "PROCTEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "start", "command":
		helper(os.Getenv(helperEnv))
		return
	}
	os.Exit(m.Run())
}

// helper starts `sleep 1000` the way a test would, prints its pid, and
// blocks until it is killed.
func helper(how string) {
	var pid int
	switch how {
	case "start":
		p := proctest.Start(nopTB{}, "", nil, "sleep", "1000")
		pid = p.Cmd.Process.Pid
	case "command":
		cmd := proctest.Command(context.Background(), "sleep", "1000")
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		pid = cmd.Process.Pid
	}
	fmt.Println(pid)
	select {}
}

// nopTB is enough of a testing.TB for proctest.Start outside a test.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Cleanup(func())            {}
func (nopTB) Fatalf(f string, a ...any) { fmt.Printf("error "+f+"\n", a...); os.Exit(1) }

// alive reports whether pid is a live process (not gone, not a zombie
// that nobody reaped yet).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	return !strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

// TestChildrenDieWithTheTest kills, with SIGKILL, a process standing for a
// test binary that started a child through proctest (Start, Command): the
// child must die too, not linger as the hubs of an interrupted go test
// used to.
func TestChildrenDieWithTheTest(t *testing.T) {
	for _, how := range []string{"start", "command"} {
		t.Run(how, func(t *testing.T) {
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			parent := exec.Command(exe)
			parent.Env = append(os.Environ(), helperEnv+"="+how)
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				_ = parent.Process.Kill()
				t.Fatalf("helper: %v", err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				_ = parent.Process.Kill()
				t.Fatalf("helper said %q", line)
			}
			t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) }) // should the test fail
			if !alive(child) {
				t.Fatalf("child %d is not running", child)
			}
			if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			waitfor.True(t, fmt.Sprintf("child %d to die with its parent", child), func() bool { return !alive(child) })
		})
	}
}

// TestRefusedAddr: nothing answers on the address, and nobody else can
// listen on it while the test holds it.
func TestRefusedAddr(t *testing.T) {
	addr := proctest.RefusedAddr(t)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("another listener took %s", addr)
	}
}
