// Package webhook delivers messages by HTTP POST to an agent's callback URL
// and classifies the answer: a 2xx is delivered (unless the body says the
// receiver rejected it), a 4xx is a rejection, and a 5xx, 408, 425, 429 or a
// network failure is retried.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// maxReply bounds how much of a receiver's answer is read and kept.
const maxReply = 1 << 20

// Encoder turns a message into the request body for one protocol.
type Encoder interface {
	// Encode returns the body and its content type, or an error when the
	// message cannot be expressed (it is then rejected with code 415).
	Encode(a *core.Agent, m *core.Message) (body []byte, contentType string, err error)
}

// Signer adds authentication headers (for example an HMAC signature) to an
// outgoing request carrying message messageID to agent a.
type Signer interface {
	Sign(req *http.Request, a *core.Agent, messageID string, body []byte) error
}

// Deliverer posts messages to callback URLs.
type Deliverer struct {
	Client  *http.Client
	Encoder Encoder
	Signer  Signer // optional
	// UserAgent is sent on every request.
	UserAgent string
}

// New returns a deliverer with client (a default with a 10s timeout if nil).
func New(client *http.Client, enc Encoder, signer Signer) *Deliverer {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Deliverer{Client: client, Encoder: enc, Signer: signer, UserAgent: "switchboard"}
}

// Deliver implements core.Deliverer.
func (d *Deliverer) Deliver(ctx context.Context, a *core.Agent, m *core.Message) core.Delivery {
	body, ctype, err := d.Encoder.Encode(a, m)
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusUnsupportedMediaType, Err: err, Detail: "cannot encode for receiver"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Endpoint.URL, bytes.NewReader(body))
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRetry, Err: fmt.Errorf("build request: %w", err)}
	}
	// The keys are canonical, as Header.Set would make them, and the
	// values share one allocation.
	v := []string{ctype, d.UserAgent, m.ID, strconv.Itoa(m.Attempts + 1), m.TraceParent}
	req.Header["Content-Type"] = v[0:1:1]
	req.Header["User-Agent"] = v[1:2:2]
	req.Header["X-Switchboard-Message-Id"] = v[2:3:3]
	req.Header["X-Switchboard-Attempt"] = v[3:4:4]
	if m.TraceParent != "" {
		req.Header["Traceparent"] = v[4:5:5]
	}
	if d.Signer != nil {
		if err := d.Signer.Sign(req, a, m.ID, body); err != nil {
			return core.Delivery{Kind: core.OutcomeRetry, Err: fmt.Errorf("sign request: %w", err)}
		}
	}
	resp, err := d.Client.Do(req)
	if errors.Is(err, ssrf.ErrBlocked) {
		// The policy will not change between attempts: refuse for good.
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusForbidden, Err: err, Detail: "callback destination not allowed"}
	}
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRetry, Err: scrub(err)}
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRetry, Code: resp.StatusCode, Err: fmt.Errorf("read answer: %w", err)}
	}
	return Classify(resp.StatusCode, reply)
}

// scrub shortens transport errors to their cause.
func scrub(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out: %w", context.DeadlineExceeded)
	}
	return err
}

// Classify maps a receiver's HTTP answer to a delivery outcome. A 2xx body
// that is a JSON object with "status": "rejected" is a rejection with its
// "code" (default 422).
func Classify(status int, reply []byte) core.Delivery {
	var keep []byte
	if json.Valid(reply) {
		keep = reply
	}
	switch {
	case status >= 200 && status < 300:
		if mayReject(reply) {
			var ack struct {
				Status string `json:"status"`
				Code   int    `json:"code"`
				Detail string `json:"detail"`
			}
			if json.Unmarshal(reply, &ack) == nil && ack.Status == "rejected" {
				code := ack.Code
				if code == 0 {
					code = http.StatusUnprocessableEntity
				}
				why := ack.Detail
				if why == "" {
					why = fmt.Sprintf("receiver rejected it (code %d)", code)
				}
				// The refusal's text is the dead letter's last error.
				return core.Delivery{Kind: core.OutcomeRejected, Code: code, Reply: keep, Detail: ack.Detail, Err: errors.New(why)}
			}
		}
		return core.Delivery{Kind: core.OutcomeDelivered, Code: status, Reply: keep}
	case status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests || status >= 500:
		return core.Delivery{Kind: core.OutcomeRetry, Code: status, Err: fmt.Errorf("receiver answered %d", status)}
	default:
		why := fmt.Sprintf("receiver answered %d", status)
		var body struct {
			Detail  string `json:"detail"`
			Message string `json:"message"`
		}
		if keep != nil && json.Unmarshal(keep, &body) == nil {
			if d := cmp.Or(body.Detail, body.Message); d != "" {
				why += ": " + d
			}
		}
		return core.Delivery{Kind: core.OutcomeRejected, Code: status, Reply: keep, Detail: fmt.Sprintf("receiver answered %d", status),
			Err: errors.New(why)}
	}
}

// mayReject reports whether reply may decode to a "status" of "rejected",
// so that the common acknowledgement is not decoded. A JSON string is
// "rejected" only if the word appears in it literally or with some letter
// escaped as \uXXXX.
func mayReject(reply []byte) bool {
	return bytes.Contains(reply, []byte("rejected")) || bytes.Contains(reply, []byte(`\u`))
}
