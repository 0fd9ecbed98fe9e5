package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
)

// TestExamples runs the Go planner and worker through the tutorial's happy
// path, the offline → timeout path, and the recovery.
func TestExamples(t *testing.T) {
	fullLane(t)
	root := proctest.RepoRoot()
	bin := t.TempDir()
	for _, name := range []string{"planner", "worker"} {
		cmd := proctest.Command(context.Background(), "go", "build", "-o", filepath.Join(bin, name), "./examples/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	hub := proctest.StartHub(t, "", "--dev", "--data", t.TempDir()).URL
	startWorker := func() *proctest.Proc {
		// A restarted worker listens on a new port and registers it.
		w := proctest.Start(t, bin, nil, filepath.Join(bin, "worker"), "-hub", hub, "-listen", "127.0.0.1:0")
		w.WaitOutput(t, "registered")
		return w
	}
	planner := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := proctest.Command(ctx, filepath.Join(bin, "planner"), "-hub", hub, "-ttl", "2s").CombinedOutput()
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
