package hub_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// slowRefill is a rate limit whose bucket gains a token every 100 s: the
// tests below count refusals after a burst of 5, and a faster refill
// would let a request through whenever the machine is slow enough
// (a 5/s limit failed that way under load).
const slowRefill = 0.01

func TestRateLimitAndHeaders(t *testing.T) {
	h, base := hubtest.Start(t, hub.Options{RateLimit: slowRefill, RateBurst: 5})
	get := func(token string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	codes := map[int]int{}
	var limited *http.Response
	for i := 0; i < 8; i++ {
		r := get("")
		codes[r.StatusCode]++
		if r.StatusCode == http.StatusTooManyRequests {
			limited = r
		}
	}
	if codes[200] != 5 || codes[429] != 3 {
		t.Fatalf("anonymous caller at burst 5: %v", codes)
	}
	if limited.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// The refusals are counted in the metrics.
	mreq, _ := http.NewRequest("GET", base+"/metrics", nil)
	mreq.Header.Set("Authorization", "Bearer "+h.AdminToken)
	mres, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	exposition, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	if !strings.Contains(string(exposition), `switchboard_http_requests_rate_limited_total{caller="anonymous"} 3`) {
		t.Errorf("rate-limited requests not counted:\n%s", exposition)
	}
	for i := 0; i < 10; i++ {
		if r := get(h.AdminToken); r.StatusCode != 200 {
			t.Fatalf("the operator is not rate limited: %d", r.StatusCode)
		}
	}
	r := get(h.AdminToken)
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// TestRefusedCredentialsAreRateLimited: requests with a token the hub
// does not know count against their address like anonymous ones, so
// made-up tokens meet the limit too; the refusals carry the security
// headers.
func TestRefusedCredentialsAreRateLimited(t *testing.T) {
	_, base := hubtest.Start(t, hub.Options{RateLimit: slowRefill, RateBurst: 5})
	codes := map[int]int{}
	for i := range 8 {
		req, _ := http.NewRequest("GET", base+"/atp/agents", nil)
		req.Header.Set("Authorization", "Bearer sbk_made-up-"+strconv.Itoa(i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Fatalf("a %d refusal without the security headers (X-Frame-Options %q)", resp.StatusCode, got)
		}
	}
	if codes[401] != 5 || codes[429] != 3 {
		t.Fatalf("made-up tokens from one address at burst 5: %v, want 5×401 then 3×429", codes)
	}
}

func TestDevRefusedOffLoopback(t *testing.T) {
	if _, err := hub.New(t.Context(), hub.Options{Dev: true, Addr: "0.0.0.0:8080", DataDir: t.TempDir()}); err == nil {
		t.Fatal("--dev on a public address must be refused")
	}
}

func TestServesTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const bodyTimeout = 200 * time.Millisecond
	h, err := hub.New(ctx, hub.Options{DataDir: filepath.Join(dir, "data"), AdminToken: "sba_t", TLSCert: certFile, TLSKey: keyFile, Addr: "127.0.0.1:0", BodyTimeout: bodyTimeout, Logger: hubtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Serve(ctx, ln) }()
	pool := x509.NewCertPool()
	pool.AddCert(mustParse(t, der))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	var resp *http.Response
	waitfor.OK(t, "the hub to answer over HTTPS", func() (err error) {
		resp, err = c.Get("https://" + ln.Addr().String() + "/healthz")
		return err
	})
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("https answer %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	// HTTP/2 (over TLS) bodies are bounded by the body deadline too, and
	// one that arrived in time leaves the connection's later streams be.
	c2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}, Timeout: 5 * time.Second}
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+"/atp/register", strings.NewReader(`{"agent_id":"h2-`+strconv.Itoa(i)+`"}`))
		req.Header.Set("Authorization", "Bearer sba_t")
		req.Header.Set("Content-Type", "application/json")
		r, err := c2.Do(req)
		if err != nil {
			t.Fatalf("POST over HTTP/2: %v", err)
		}
		r.Body.Close()
		if r.StatusCode != 200 || r.ProtoMajor != 2 {
			t.Fatalf("POST over HTTP/2: %d %s", r.StatusCode, r.Proto)
		}
		time.Sleep(3 * bodyTimeout) // the scenario: the connection idles past the deadline
	}
	// A body trickled over HTTP/2 is cut off at the deadline as well.
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+"/atp/register", pr)
	req.Header.Set("Authorization", "Bearer sba_t")
	req.Header.Set("Content-Type", "application/json")
	go func() { _, _ = io.WriteString(pw, `{"agent_id":`) }()
	r, err := c2.Do(req)
	if err != nil {
		t.Fatalf("trickled POST over HTTP/2: %v", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusRequestTimeout || r.ProtoMajor != 2 {
		t.Fatalf("trickled POST over HTTP/2: %d %s, want 408", r.StatusCode, r.Proto)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		if r2, _ := http.Get("http://" + ln.Addr().String() + "/healthz"); r2 != nil && r2.StatusCode == 200 {
			t.Fatal("plain HTTP was served on the TLS port")
		}
	}
	cancel()
	<-done
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
