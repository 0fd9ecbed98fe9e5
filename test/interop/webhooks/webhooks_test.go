// Package webhooks_test checks that the hub's pushes verify with the
// Standard Webhooks reference library (the standardwebhooks npm package,
// installed from the committed lock file): receivers in other languages
// need no verifier of their own. Without node_modules the test skips,
// unless CI is set: then it fails.
package webhooks_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

type captured struct {
	header http.Header
	body   []byte
}

// capture answers every push with 200 and keeps the first.
type capture struct {
	mu    sync.Mutex
	first *captured
	got   chan struct{}
}

func newCapture() *capture { return &capture{got: make(chan struct{})} }

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	if c.first == nil {
		c.first = &captured{header: r.Header.Clone(), body: b}
		close(c.got)
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"accepted"}`)
}

func (c *capture) wait(t *testing.T, what string) *captured {
	t.Helper()
	select {
	case <-c.got:
	case <-time.After(30 * time.Second):
		t.Fatalf("no push reached %s within 30 s", what)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

type verifyCase struct {
	Name       string            `json:"name"`
	Secret     string            `json:"secret"`
	Headers    map[string]string `json:"headers"`
	BodyBase64 string            `json:"body_base64"`
}

func TestHubWebhooksVerifyWithStandardWebhooks(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node_modules", "standardwebhooks", "package.json"))
	}
	if err != nil {
		msg := "node or node_modules missing: run `npm ci --prefix test/interop/webhooks` (" + err.Error() + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, base := hubtest.Start(t, hub.Options{Callbacks: ssrf.Policy{AllowLoopback: true}})
	ctx := context.Background()

	atpInbox, mampInbox := newCapture(), newCapture()
	atpSrv, mampSrv := httptest.NewServer(atpInbox), httptest.NewServer(mampInbox)
	defer atpSrv.Close()
	defer mampSrv.Close()

	worker := client.New(base)
	wreg, err := worker.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: atpSrv.URL})
	if err != nil || !strings.HasPrefix(wreg.SigningSecret, webhooksig.SecretPrefix) {
		t.Fatalf("register worker: %+v %v (want a %s… signing secret)", wreg, err, webhooksig.SecretPrefix)
	}
	// A MAMP agent with an endpoint: its pushes are signed the same way.
	body, _ := json.Marshal(map[string]any{"agent_id": "vision", "name": "Vision", "endpoint_url": mampSrv.URL})
	res, err := http.Post(base+"/mamp/v1/agents", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var mreg struct {
		SigningSecret string `json:"signing_secret"`
	}
	_ = json.NewDecoder(res.Body).Decode(&mreg)
	res.Body.Close()
	if res.StatusCode >= 300 || mreg.SigningSecret == "" {
		t.Fatalf("register MAMP agent: %d, secret %q", res.StatusCode, mreg.SigningSecret)
	}

	sender := client.New(base)
	if _, err := sender.Register(ctx, client.Registration{AgentID: "planner"}); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"worker", "vision"} {
		if r, err := sender.Send(ctx, client.Message{Sender: "planner", Receiver: to, Type: "task.request",
			Payload: map[string]any{"text": "héllo, " + to}}, 10*time.Second); err != nil || r.Status != "delivered" {
			t.Fatalf("send to %s: %+v %v", to, r, err)
		}
	}
	atpPush, mampPush := atpInbox.wait(t, "the ATP worker"), mampInbox.wait(t, "the MAMP agent")

	headers := func(p *captured, edit func(map[string]string)) map[string]string {
		h := map[string]string{}
		for _, k := range []string{webhooksig.IDHeader, webhooksig.TimestampHeader, webhooksig.SignatureHeader} {
			h[k] = p.header.Get(k)
		}
		if edit != nil {
			edit(h)
		}
		return h
	}
	b64 := base64.StdEncoding.EncodeToString
	cases := []struct {
		vc   verifyCase
		want string
	}{
		{verifyCase{"atp push", wreg.SigningSecret, headers(atpPush, nil), b64(atpPush.body)}, "verified"},
		{verifyCase{"mamp push", mreg.SigningSecret, headers(mampPush, nil), b64(mampPush.body)}, "verified"},
		{verifyCase{"atp push, body altered", wreg.SigningSecret, headers(atpPush, nil), b64(bytes.Replace(atpPush.body, []byte("worker"), []byte("w0rker"), 1))}, "refused"},
		{verifyCase{"atp push, another agent's secret", mreg.SigningSecret, headers(atpPush, nil), b64(atpPush.body)}, "refused"},
		{verifyCase{"atp push, id changed", wreg.SigningSecret, headers(atpPush, func(h map[string]string) { h[webhooksig.IDHeader] += "x" }), b64(atpPush.body)}, "refused"},
	}
	var in struct {
		Cases []verifyCase `json:"cases"`
	}
	for _, c := range cases {
		in.Cases = append(in.Cases, c.vc)
	}
	file := filepath.Join(t.TempDir(), "cases.json")
	raw, _ := json.Marshal(in)
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, node, "verify.mjs", file).CombinedOutput()
	t.Logf("verify.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("verify.mjs: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d cases", len(lines), len(cases))
	}
	for i, c := range cases {
		if !strings.HasPrefix(lines[i], c.want+" "+c.vc.Name) {
			t.Errorf("case %q: %q, want %s", c.vc.Name, lines[i], c.want)
		}
	}

	// The Go verifier agrees on the real pushes.
	for _, p := range []struct {
		name   string
		secret string
		push   *captured
	}{{"atp", wreg.SigningSecret, atpPush}, {"mamp", mreg.SigningSecret, mampPush}} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header = p.push.header
		if err := webhooksig.NewVerifier([]byte(p.secret)).Verify(r, p.push.body); err != nil {
			t.Errorf("webhooksig refuses the hub's %s push: %v", p.name, err)
		}
	}
}
