package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// waitOutput waits until p has printed want, failing with what it printed
// when it has not within the deadline.
func waitOutput(t *testing.T, p *proctest.Proc, what, want string) {
	t.Helper()
	waitfor.OKWithin(t, 20*time.Second, fmt.Sprintf("%s (%q)", what, want), func() error {
		if strings.Contains(p.Out.String(), want) {
			return nil
		}
		if p.Exited() {
			t.Fatalf("waiting for %s (%q): the process ended; output:\n%s", what, want, p.Out.String())
		}
		return fmt.Errorf("not printed; output so far:\n%s", p.Out.String())
	})
}

// TestExamplesOnADefaultHub follows the README's Quickstart: a hub started
// with nothing but `switchboard serve` (auth on, loopback callbacks
// refused), the examples run unchanged from one directory, each agent with
// its own token file, a second run of each reusing its token; then the
// worker's absence (three timeouts) and its return.
func TestExamplesOnADefaultHub(t *testing.T) {
	root := proctest.RepoRoot()
	bin := t.TempDir()
	for _, name := range []string{"planner", "worker"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./examples/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	data := t.TempDir()
	addr := proctest.FreeAddr(t)
	hub := "http://" + addr
	hubProc := proctest.StartHub(t, addr, "--data", data)
	tokenFile := filepath.Join(data, "admin.token")
	waitOutput(t, hubProc, "the first-start notice", "first start")
	for _, want := range []string{tokenFile, "Authorization: Bearer", "/atp/register"} {
		if !strings.Contains(hubProc.Out.String(), want) {
			t.Errorf("the first-start notice lacks %q:\n%s", want, hubProc.Out.String())
		}
	}
	if st, err := os.Stat(tokenFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v (mode %v), want 0600", err, st.Mode().Perm())
	}
	admin, _ := os.ReadFile(tokenFile)
	if strings.Contains(hubProc.Out.String(), strings.TrimSpace(string(admin))) {
		t.Fatal("the hub printed its admin token")
	}

	agents := t.TempDir() // the directory the examples run in: their token files land here
	env := []string{"SWITCHBOARD_HUB=" + hub, "SWITCHBOARD_TOKEN=", "SWITCHBOARD_WORKER_TOKEN=", "SWITCHBOARD_PLANNER_TOKEN="}
	startWorker := func(first bool) *proctest.Proc {
		w := proctest.Start(t, agents, env, filepath.Join(bin, "worker"))
		waitOutput(t, w, "the worker's registration", "receiving by stream")
		if issued := strings.Contains(w.Out.String(), "issued worker a token"); issued != first {
			t.Fatalf("worker run (first %v) said issued=%v:\n%s", first, issued, w.Out.String())
		}
		return w
	}
	planner := func() (string, error) {
		cmd := exec.Command(filepath.Join(bin, "planner"), "-ttl", "2s")
		cmd.Dir, cmd.Env = agents, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	w := startWorker(true)
	for run := 1; run <= 2; run++ {
		out, err := planner()
		if err != nil || !strings.Contains(out, "final: delivered") || !strings.Contains(out, `"text":"yaler aiv tnega itlum"`) {
			t.Fatalf("planner run %d: %v\n%s", run, err, out)
		}
		if issued := strings.Contains(out, "issued planner a token"); issued != (run == 1) {
			t.Fatalf("planner run %d: issued=%v:\n%s", run, issued, out)
		}
	}
	tokens := map[string]string{}
	for _, id := range []string{"worker", "planner"} {
		f := filepath.Join(agents, id+".token")
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v (mode %v), want 0600", f, err, st.Mode().Perm())
		}
		b, _ := os.ReadFile(f)
		tokens[id] = strings.TrimSpace(string(b))
	}
	if tokens["worker"] == tokens["planner"] || !strings.HasPrefix(tokens["worker"], "sbk_") {
		t.Fatalf("the agents' tokens: %v; want two different sbk_ tokens", tokens)
	}

	w.Kill()
	out, err := planner()
	if err == nil || strings.Count(out, "no receipt: timeout") != 3 {
		t.Fatalf("worker away: want three timeouts and a failure, got %v\n%s", err, out)
	}
	startWorker(false) // registers again with its saved token
	if out, err = planner(); err != nil || !strings.Contains(out, "final: delivered") {
		t.Fatalf("worker back: %v\n%s", err, out)
	}
}
