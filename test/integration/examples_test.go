package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
)

// TestExamples runs the Go planner and worker through the tutorial's happy
// path, the offline → timeout path, and the recovery.
func TestExamples(t *testing.T) {
	root := proctest.RepoRoot()
	bin := t.TempDir()
	for _, name := range []string{"planner", "worker"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./examples/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	addr := proctest.FreeAddr(t)
	hub := "http://" + addr
	proctest.StartHub(t, addr, "--dev", "--data", t.TempDir())
	wAddr := proctest.FreeAddr(t)
	startWorker := func() *proctest.Proc {
		w := proctest.Start(t, bin, nil, filepath.Join(bin, "worker"), "-hub", hub, "-listen", wAddr)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(w.Out.String(), "registered") {
			if time.Now().After(deadline) {
				t.Fatalf("worker did not register: %s", w.Out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return w
	}
	planner := func() (string, error) {
		out, err := exec.Command(filepath.Join(bin, "planner"), "-hub", hub, "-ttl", "2s").CombinedOutput()
		return string(out), err
	}
	w := startWorker()
	out, err := planner()
	if err != nil || !strings.Contains(out, "final: delivered") || !strings.Contains(out, `"text":"yaler aiv tnega itlum"`) {
		t.Fatalf("happy path: %v\n%s", err, out)
	}
	w.Kill()
	out, err = planner()
	if err == nil || strings.Count(out, "no receipt: timeout") != 3 {
		t.Fatalf("offline path: want three timeouts and a failure, got %v\n%s", err, out)
	}
	startWorker()
	if out, err = planner(); err != nil || !strings.Contains(out, "final: delivered") {
		t.Fatalf("recovery: %v\n%s", err, out)
	}
}
