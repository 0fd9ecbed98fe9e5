package webhooksig_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/webhooksig"
)

// A receiver verifies every push before it trusts it. The secret is the
// signing_secret the hub returned when the agent registered.
func ExampleVerifier() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // from the registration's signing_secret
	verifier := webhooksig.NewVerifier([]byte(secret))

	inbox := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := verifier.Verify(r, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Printf("verified delivery %s: %s\n", r.Header.Get(webhooksig.IDHeader), body)
		w.WriteHeader(http.StatusOK)
	})

	// What the hub sends (here signed with the same secret), then a forgery.
	body := `{"message_id":"m1","payload":{"text":"hello"}}`
	req := httptest.NewRequest(http.MethodPost, "/inbox", strings.NewReader(body))
	_ = webhooksig.Sign(req, secret, "m1", []byte(body), time.Now())
	rec := httptest.NewRecorder()
	inbox.ServeHTTP(rec, req)
	fmt.Println(rec.Code)

	forged := httptest.NewRequest(http.MethodPost, "/inbox", strings.NewReader(body))
	forged.Header.Set(webhooksig.IDHeader, "m1")
	forged.Header.Set(webhooksig.TimestampHeader, fmt.Sprint(time.Now().Unix()))
	forged.Header.Set(webhooksig.SignatureHeader, "v1,Zm9yZ2Vk")
	rec = httptest.NewRecorder()
	inbox.ServeHTTP(rec, forged)
	fmt.Println(rec.Code)
	// Output:
	// verified delivery m1: {"message_id":"m1","payload":{"text":"hello"}}
	// 200
	// 401
}

// Verify tells why a request was refused; match the reason with errors.Is.
func ExampleVerifier_Verify() {
	secret := webhooksig.NewSecret()
	now := time.Unix(1_800_000_000, 0)
	v := &webhooksig.Verifier{Secret: []byte(secret), Now: func() time.Time { return now }}
	body := []byte(`{"message_id":"m1"}`)

	req := httptest.NewRequest(http.MethodPost, "/", nil)
	_ = webhooksig.Sign(req, secret, "m1", body, now)
	fmt.Println("first:", v.Verify(req, body))
	fmt.Println("again is a replay:", errors.Is(v.Verify(req, body), webhooksig.ErrReplay))

	old := httptest.NewRequest(http.MethodPost, "/", nil)
	_ = webhooksig.Sign(old, secret, "m2", body, now.Add(-10*time.Minute))
	fmt.Println("ten minutes old is stale:", errors.Is(v.Verify(old, body), webhooksig.ErrStale))

	fmt.Println("other body:", v.Verify(req, []byte(`{"message_id":"m9"}`)))
	// Output:
	// first: <nil>
	// again is a replay: true
	// ten minutes old is stale: true
	// other body: webhook signature does not match
}

// Signature is the whole algorithm: HMAC-SHA256 of "id.timestamp.body"
// with the secret's key, base64-encoded after "v1,".
func ExampleSignature() {
	key, err := webhooksig.Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	fmt.Println(webhooksig.Signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}
