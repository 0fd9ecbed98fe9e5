// Package atp_test runs the ATP tutorial's own Python agents against the
// real switchboard binary.
package atp_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
)

const python = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	err := exec.Command(python, "-c", "import fastapi, uvicorn, httpx").Run()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("python3-fastapi, python3-uvicorn and python3-httpx are required in CI: %v", err)
	}
	t.Skip("install Debian's python3-fastapi python3-uvicorn python3-httpx to run the tutorial clients")
}

// TestTutorialClients runs the happy path, the offline → timeout path and
// the recovery of the tutorial with its unmodified planner and worker. The
// tutorial hard-codes the relay at 127.0.0.1:8001 and the worker at 8002.
func TestTutorialClients(t *testing.T) {
	needPython(t)
	dir, _ := filepath.Abs(".")
	hub := proctest.StartHub(t, "127.0.0.1:8001", "--dev", "--data", t.TempDir())

	startWorker := func() *proctest.Proc {
		w := proctest.Start(t, dir, nil, python, "-m", "uvicorn", "worker_agent:app", "--port", "8002")
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(w.Out.String(), "注册成功") {
			if time.Now().After(deadline) {
				t.Fatalf("worker did not register:\n%s\nhub:\n%s", w.Out.String(), hub.Out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return w
	}
	planner := func() string {
		out, err := exec.Command(python, filepath.Join(dir, "planner_agent.py")).CombinedOutput()
		if err != nil {
			t.Fatalf("planner: %v\n%s", err, out)
		}
		return string(out)
	}

	// What the tutorial says the planner prints on the happy path: the
	// send answers delivered (the hub waits for its first push to an
	// online worker), and the final receipt carries the worker's result.
	happy := func(name, out string) {
		t.Helper()
		for _, want := range []string{
			"发送任务…",
			" 第 1 次投递 → 200 delivered\n",
			"最终结果: {",
			"'status': 'delivered', 'receipt': {'status': 'accepted', 'message_id': ",
			"'handled_by': 'worker'",
			"'result': {'text': 'yaler aiv tnega itlum'}",
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("%s: want %q in the planner's output, got:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "没拿到回执") || strings.Contains(out, "第 2 次投递") {
			t.Fatalf("%s: the planner had to try again:\n%s", name, out)
		}
	}

	w := startWorker()
	happy("happy path", planner())

	w.Kill() // the receiver goes offline; its lease is still current
	out := planner()
	// Each send is durable and queued (its first push is refused at
	// once), and ends timeout when its TTL passes, as the tutorial shows.
	for i := 1; i <= 3; i++ {
		if want := fmt.Sprintf(" 第 %d 次投递 → 200 queued\n", i); !strings.Contains(out, want) {
			t.Fatalf("offline path: want %q, got:\n%s", want, out)
		}
	}
	if strings.Count(out, "没拿到回执：timeout") != 3 || !strings.Contains(out, "最终结果: {'status': 'failed'") {
		t.Fatalf("offline path: want three timeouts then failed, got:\n%s", out)
	}

	startWorker()
	happy("recovery", planner())
}
