package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/webhooksig"
)

// TestSignMatchesWebhooksig checks that the signer's cached HMACs sign as
// webhooksig does, for several agents and requests in a row.
func TestSignMatchesWebhooksig(t *testing.T) {
	now := time.Unix(1767312000, 0)
	s := &HMACSigner{Key: []byte("hub key"), Now: func() time.Time { return now }}
	for i, a := range []core.Agent{{ID: "a", Generation: "g1"}, {ID: "b"}, {ID: "a", Generation: "g1"}, {ID: "a", Generation: "g2"}, {ID: "b"}} {
		id := a.ID
		body := bytes.Repeat([]byte{'x'}, i*100)
		req := httptest.NewRequest(http.MethodPost, "http://agent/inbox", nil)
		msgID := "msg-" + string(rune('0'+i))
		if err := s.Sign(req, &a, msgID, body); err != nil {
			t.Fatal(err)
		}
		secret := []byte(s.SecretFor(id, a.Generation))
		want := httptest.NewRequest(http.MethodPost, "http://agent/inbox", nil)
		if err := webhooksig.Sign(want, string(secret), msgID, body, now); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{webhooksig.IDHeader, webhooksig.TimestampHeader, webhooksig.SignatureHeader} {
			if got := req.Header.Values(k); len(got) != 1 || got[0] != want.Header.Get(k) {
				t.Fatalf("push %d to %s: %s = %q, want %q", i, id, k, got, want.Header.Get(k))
			}
		}
		v := webhooksig.NewVerifier(secret)
		v.Now = s.Now
		if err := v.Verify(req, body); err != nil {
			t.Fatalf("push %d to %s does not verify: %v", i, id, err)
		}
	}
}

type rawEncoder struct{}

func (rawEncoder) Encode(_ *core.Agent, m *core.Message) ([]byte, string, error) {
	return []byte(`{"id":"` + m.ID + `"}`), "application/json", nil
}

// TestDeliverHeaders checks the headers of a push as the receiver sees
// them.
func TestDeliverHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	defer srv.Close()
	d := New(srv.Client(), rawEncoder{}, &HMACSigner{Key: []byte("k")})
	m := &core.Message{ID: "m1", Attempts: 2, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	res := d.Deliver(context.Background(), &core.Agent{ID: "a", Endpoint: core.Endpoint{URL: srv.URL}}, m)
	if res.Kind != core.OutcomeDelivered || string(res.Reply) != `{"status":"accepted"}` {
		t.Fatalf("delivery: %+v", res)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "User-Agent": "switchboard",
		"X-Switchboard-Message-Id": "m1", "X-Switchboard-Attempt": "3", "traceparent": m.TraceParent} {
		if v := got.Values(k); len(v) != 1 || v[0] != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if got.Get(webhooksig.SignatureHeader) == "" || got.Get(webhooksig.TimestampHeader) == "" || got.Get(webhooksig.IDHeader) != "m1" {
		t.Errorf("unsigned push: %v", got)
	}
}

// TestClassify covers the answers to a push, with the rejection spelled
// in the ways encoding/json reads it.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		reply  string
		kind   core.OutcomeKind
		code   int
		keep   bool
	}{
		{200, `{"status":"accepted"}`, core.OutcomeDelivered, 200, true},
		{202, ``, core.OutcomeDelivered, 202, false},
		{200, `not json`, core.OutcomeDelivered, 200, false},
		{200, `{"status":"rejected"}`, core.OutcomeRejected, 422, true},
		{200, `{"status":"rejected","code":409,"detail":"no"}`, core.OutcomeRejected, 409, true},
		{200, `{"STATUS":"rejected"}`, core.OutcomeRejected, 422, true},
		{200, `{"status":"r\u0065jected"}`, core.OutcomeRejected, 422, true},
		{200, `{"st\u0061tus":"rejected"}`, core.OutcomeRejected, 422, true},
		{200, `{"status":"Rejected"}`, core.OutcomeDelivered, 200, true},
		{200, `{"status":"rejected"`, core.OutcomeDelivered, 200, false},
		{200, `{"detail":"rejected"}`, core.OutcomeDelivered, 200, true},
		{404, `{"error":"x"}`, core.OutcomeRejected, 404, true},
		{503, ``, core.OutcomeRetry, 503, false},
	} {
		got := Classify(c.status, []byte(c.reply))
		if got.Kind != c.kind || got.Code != c.code || (got.Reply != nil) != c.keep {
			t.Errorf("Classify(%d, %s) = %v %d reply %q; want %v %d keep %v", c.status, c.reply, got.Kind, got.Code, got.Reply, c.kind, c.code, c.keep)
		}
	}
}

// TestSecretPerIdentity: an id registered again (a new generation) gets a
// secret of its own, which the old identity's secret does not give away,
// and the hub's key decides all of them.
func TestSecretPerIdentity(t *testing.T) {
	s := &HMACSigner{Key: []byte("hub key")}
	other := &HMACSigner{Key: []byte("another hub key")}
	tests := []struct {
		name      string
		a, b      string
		wantEqual bool
		sa, sb    *HMACSigner
	}{
		{"same identity", "g1", "g1", true, s, s},
		{"next generation", "g1", "g2", false, s, s},
		{"legacy id vs a generation", "", "g1", false, s, s},
		{"another hub key", "g1", "g1", false, s, other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y := tt.sa.SecretFor("worker", tt.a), tt.sb.SecretFor("worker", tt.b)
			if (x == y) != tt.wantEqual {
				t.Errorf("secrets %q and %q: equal %v, want %v", x, y, x == y, tt.wantEqual)
			}
		})
	}
}
