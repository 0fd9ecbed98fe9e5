// Package dashboard_test drives the hub's web dashboard end to end in
// Debian's headless Chromium (playwright-core from npm, no browser
// download). Install once: apt-get install -y chromium and
// npm ci --prefix test/e2e/dashboard.
package dashboard_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/proctest"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

const chromiumPath = "/usr/bin/chromium"

// requirements fails (CI set) or skips when Chromium or node_modules are
// missing.
func requirements(t *testing.T) (node, chromium string) {
	t.Helper()
	if testing.Short() {
		t.Skip("drives headless Chromium against a hub: full lane, not with -short")
	}
	missing := func(what string) {
		msg := what + " missing: run `apt-get install -y chromium` and `npm ci --prefix test/e2e/dashboard`"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = chromiumPath
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("Chromium (" + chromium + ")")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		missing("node_modules/playwright-core")
	}
	return node, chromium
}

func call(t *testing.T, method, url, token string, body any) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, out)
	}
	return out
}

// pngBase64 draws a small real PNG (a switchboard-ish grid).
func pngBase64(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for y := 0; y < 32; y++ {
		for x := 0; x < 48; x++ {
			c := color.RGBA{0x2f, 0x5b, 0xea, 0xff}
			if (x/8+y/8)%2 == 0 {
				c = color.RGBA{0xf4, 0xb4, 0x00, 0xff}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestDashboardInChromium(t *testing.T) {
	node, chromium := requirements(t)
	opt := hub.Options{DataDir: t.TempDir(), Callbacks: ssrf.Policy{AllowLoopback: true}}
	h, base, stop := hubtest.StartStop(t, opt)
	tok := h.AdminToken
	host := h.Relay.Config().Host
	uri := func(id string) string { return "agent://" + host + "/" + id }

	// ATP workers: one that answers, one that refuses until told otherwise.
	answer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"accepted","result":{"text":"ok"}}`)
	}))
	defer answer.Close()
	var healthy atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"status":"rejected","code":422,"detail":"not today"}`)
			return
		}
		fmt.Fprint(w, `{"status":"accepted"}`)
	}))
	defer flaky.Close()
	// A MAMP agent's endpoint.
	mampAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"received"}`)
	}))
	defer mampAgent.Close()

	call(t, "POST", base+"/atp/register", tok, map[string]any{"agent_id": "translator", "callback_url": answer.URL,
		"capabilities": []string{"translate", "summarise"}, "lease_seconds": 600})
	call(t, "POST", base+"/atp/register", tok, map[string]any{"agent_id": "flaky-worker", "callback_url": flaky.URL, "lease_seconds": 600})
	call(t, "POST", base+"/mamp/v1/agents", tok, map[string]any{"agent_id": "alice", "name": "Alice", "description": "asks about pictures"})
	call(t, "POST", base+"/mamp/v1/agents", tok, map[string]any{"agent_id": "vision", "name": "Vision", "description": "looks at images",
		"endpoint_url": mampAgent.URL, "capabilities": map[string]any{"content_types": []string{"text", "image", "code"}, "tools": []string{"describe_image"}}})

	// A multimodal MAMP message starts a conversation.
	ack := call(t, "POST", base+"/mamp/v1/messages", tok, map[string]any{"protocol": "mamp/1.0", "message_id": "pic-1",
		"from": uri("alice"), "to": uri("vision"), "metadata": map[string]any{"timestamp": time.Now().UTC().Format(time.RFC3339)},
		"content": []map[string]any{
			{"type": "text", "text": "What is in this picture?"},
			{"type": "image", "name": "grid.png", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": pngBase64(t)}},
			{"type": "code", "language": "python", "code": "print('hello, switchboard')"},
		}})
	var a struct {
		ConversationID string `json:"conversation_id"`
	}
	if err := json.Unmarshal(ack, &a); err != nil || a.ConversationID == "" {
		t.Fatalf("MAMP ack: %s", ack)
	}

	// A dead letter: refused by the flaky worker.
	call(t, "POST", base+"/atp/send?wait_ms=10000", tok, map[string]any{"atp_version": "1.0", "message_id": "dead-1",
		"sender": "translator", "receiver": "flaky-worker", "type": "task", "ttl_ms": 60000, "payload": map[string]any{"text": "please"}})
	var rc struct{ Status string }
	_ = json.Unmarshal(call(t, "GET", base+"/atp/receipts/dead-1", tok, nil), &rc)
	if rc.Status != "rejected" {
		t.Fatalf("dead-1 is %q, want rejected", rc.Status)
	}
	healthy.Store(true) // so the replay is delivered

	// A pull agent with 30 messages queued: the history's two pages, the
	// queue depth chart and the agent's page.
	call(t, "POST", base+"/atp/register", tok, map[string]any{"agent_id": "archivist", "lease_seconds": 600})
	for i := range 30 {
		text := fmt.Sprintf("entry %d", i)
		if i == 17 {
			text = "the haystack holds a needle-7f3 here"
		}
		call(t, "POST", base+"/atp/send", tok, map[string]any{"atp_version": "1.0", "sender": "translator", "receiver": "archivist",
			"type": "note", "ttl_ms": 600000, "payload": map[string]any{"text": text}})
	}

	// An AMP session with some pressure.
	for _, ok := range []bool{false, false, false, true} {
		call(t, "POST", base+"/v4/tick", tok, map[string]any{"session_id": "session-e2e", "event": "PostToolUse", "tool_name": "Bash",
			"tool_result": map[string]any{"exit_code": map[bool]int{true: 0, false: 1}[ok], "stderr": "boom"}, "success": ok})
	}

	// Restart the hub on the same store: the browser meets a process that
	// saw none of the traffic above, so the charts must come from the store.
	stop()
	h, base = hubtest.Start(t, opt)
	if h.AdminToken != tok {
		t.Fatal("the restarted hub has another admin token")
	}

	shots, _ := filepath.Abs("screenshots")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := proctest.Command(ctx, node, "dashboard.mjs")
	cmd.Env = append(os.Environ(),
		"BASE_URL="+base, "ADMIN_TOKEN="+tok, "CHROMIUM="+chromium, "SCREENSHOTS="+shots,
		"EXPECT_AGENTS=translator,flaky-worker,alice,vision", "EXPECT_CONVERSATION="+a.ConversationID,
		"EXPECT_DEAD_LETTER=dead-1", "LIVE_SENDER=translator", "LIVE_RECEIVER=translator", "EXPECT_AMP_SESSION=session-e2e",
		"HISTORY_AGENT=archivist", "HISTORY_COUNT=30", "HISTORY_NEEDLE=needle-7f3",
		"EXPECT_ACCEPTED=32") // pic-1, dead-1 and the 30 queued
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("dashboard.mjs:\n%s", out.String())
	if err != nil {
		t.Fatalf("dashboard.mjs: %v", err)
	}
	if !strings.Contains(out.String(), "dashboard e2e: OK") {
		t.Fatal("the script did not finish")
	}
	for _, f := range []string{"01-login.png", "02-overview.png", "03-agents.png", "04-agent-page.png", "05-history.png",
		"06-conversation.png", "07-receipt.png", "08-live-flow.png", "09-dead-letters.png", "10-replay-confirm.png",
		"11-replayed.png", "12-amp-sessions.png", "dashboard.png"} {
		st, err := os.Stat(filepath.Join(shots, f))
		if err != nil || st.Size() < 2000 {
			t.Errorf("screenshot %s missing or empty: %v", f, err)
		}
	}
	// What the browser did is real: the replay was delivered.
	_ = json.Unmarshal(call(t, "GET", base+"/atp/receipts/dead-1", tok, nil), &rc)
	if rc.Status != "delivered" {
		t.Errorf("dead-1 after replay from the dashboard: %q, want delivered", rc.Status)
	}
}
