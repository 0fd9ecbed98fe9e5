// Package client is the Go client for agents on a Switchboard hub: register
// and keep the lease alive, receive messages by callback handler or by pull,
// send, and wait for a message's receipt or its result.
//
// A client acts as one agent: with auth on, the first registration of an
// agent makes the client use the credential the hub issues for it (in place
// of the admin token, which may act as any agent), so give each agent its
// own client.
//
//	worker := client.New(hub, client.WithToken(adminToken))
//	_, err := worker.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: url})
//	planner := client.New(hub, client.WithToken(adminToken))
//	_, err = planner.Register(ctx, client.Registration{AgentID: "planner"})
//	rc, err := planner.Send(ctx, client.Message{Sender: "planner", Receiver: "worker", Type: "task.request", Payload: map[string]any{"text": "hi"}})
//	final, err := planner.WaitReceipt(ctx, rc.MessageID)
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/msgid"
)

// Client talks to one hub over its ATP routes.
type Client struct {
	base    string
	token   string
	http    *http.Client
	retries int // Send's extra attempts (WithRetries)
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token (an agent's credential or the admin token).
func WithToken(t string) Option { return func(c *Client) { c.token = t } }

// WithHTTPClient sets the HTTP client.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// DefaultRetries is how many times Send tries again, by default, after a
// failure that may be passing (see WithRetries).
const DefaultRetries = 3

// WithRetries sets how many times Send tries again after a failure that may
// be passing: the hub unreachable or the connection lost (ErrUnavailable),
// or an answer of 429, 500, 502, 503, 504 or 507. It waits 100 ms before the
// first retry and twice as long before each next one, up to 2 s, each wait
// jittered down to as little as half; or as long as a 429 or 503 answer's
// Retry-After asks (at most 30 s), and gives up early when
// ctx would end first. Every attempt carries the same message_id, so the hub
// stores the message once whatever happened to an earlier attempt. 0 turns
// retries off (for a caller that fails over to another hub itself).
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(n, 0) } }

// New returns a client for the hub at baseURL.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: 90 * time.Second}, retries: DefaultRetries}
	for _, o := range opts {
		o(c)
	}
	return c
}

// SetToken replaces the bearer token (for example with the one Register
// returned).
func (c *Client) SetToken(t string) { c.token = t }

// Token returns the bearer token in use.
func (c *Client) Token() string { return c.token }

// BaseURL returns the hub's base URL.
func (c *Client) BaseURL() string { return c.base }

// Error is an error answer from the hub.
type Error struct {
	StatusCode int    `json:"status_code"`
	Code       string `json:"error"`
	Message    string `json:"message"`
	// RetryAfter is the answer's Retry-After, when it has one in seconds.
	RetryAfter time.Duration `json:"-"`
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("hub answered %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// ErrUnavailable wraps transport failures reaching the hub.
var ErrUnavailable = errors.New("hub unavailable")

// IsNotFound reports whether err is a 404 from the hub.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// do sends a request and decodes a 2xx JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%w: read answer: %v", ErrUnavailable, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{StatusCode: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			e.Code, e.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(data))
		}
		e.StatusCode = resp.StatusCode
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// Registration is what an agent registers.
type Registration struct {
	AgentID      string         `json:"agent_id"`
	CallbackURL  string         `json:"callback_url,omitempty"`
	Capabilities []string       `json:"capabilities"`
	LeaseSeconds int            `json:"lease_seconds,omitempty"`
	Card         map[string]any `json:"card,omitempty"`
	// Delivery is "push" (with CallbackURL), "pull" or "stream" (see
	// Client.Stream).
	Delivery string `json:"delivery,omitempty"`
}

// Registered is the hub's answer to a registration.
type Registered struct {
	OK           bool   `json:"ok"`
	AgentID      string `json:"agent_id"`
	URI          string `json:"uri"`
	LeaseSeconds int    `json:"lease_seconds"`
	Queued       int    `json:"queued"`
	Created      bool   `json:"created"`
	// Token is the agent's bearer credential, returned by its first
	// registration only (auth on); Register starts using it.
	Token string `json:"token,omitempty"`
	// SigningSecret verifies the hub's webhooks: pass
	// webhooksig.NewVerifier([]byte(SigningSecret)) as
	// CallbackOptions.Verifier.
	SigningSecret string `json:"signing_secret,omitempty"`
}

// Register registers an agent (or refreshes its registration). When the hub
// issues a credential (first registration, auth on) the client starts using
// it.
func (c *Client) Register(ctx context.Context, r Registration) (*Registered, error) {
	if r.Capabilities == nil {
		r.Capabilities = []string{}
	}
	var out Registered
	if err := c.do(ctx, http.MethodPost, "/atp/register", r, &out); err != nil {
		return nil, err
	}
	if out.Token != "" {
		c.token = out.Token
	}
	return &out, nil
}

// Heartbeat renews an agent's lease.
func (c *Client) Heartbeat(ctx context.Context, agentID string, leaseSeconds int) error {
	return c.do(ctx, http.MethodPost, "/atp/heartbeat", map[string]any{"agent_id": agentID, "lease_seconds": leaseSeconds}, nil)
}

// Deregister removes an agent.
func (c *Client) Deregister(ctx context.Context, agentID string) error {
	return c.do(ctx, http.MethodDelete, "/atp/agents/"+url.PathEscape(agentID), nil, nil)
}

// KeepAlive renews the lease every third of leaseSeconds until ctx ends,
// re-registering with reg if the hub has forgotten the agent (for example a
// fresh data directory). Errors are passed to onErr (may be nil).
func (c *Client) KeepAlive(ctx context.Context, reg Registration, onErr func(error)) {
	lease := reg.LeaseSeconds
	if lease <= 0 {
		lease = 300
	}
	period := time.Duration(lease) * time.Second / 3
	if period < 500*time.Millisecond {
		period = 500 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := c.Heartbeat(ctx, reg.AgentID, lease)
			if IsNotFound(err) {
				_, err = c.Register(ctx, reg)
			}
			if err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}

// Agent is an agent as the hub lists it.
type Agent struct {
	AgentID      string          `json:"agent_id"`
	URI          string          `json:"uri"`
	CallbackURL  string          `json:"callback_url"`
	Endpoint     string          `json:"endpoint"`
	Capabilities []string        `json:"capabilities"`
	ExpiresAt    float64         `json:"expires_at"` // lease end, Unix seconds
	LastSeen     float64         `json:"last_seen"`  // Unix seconds
	Alive        bool            `json:"alive"`
	Protocol     string          `json:"protocol"`
	Card         json.RawMessage `json:"card"`
}

// Agents lists agents, optionally by capability and only alive ones.
func (c *Client) Agents(ctx context.Context, capability string, aliveOnly bool) (map[string]Agent, error) {
	q := url.Values{}
	if capability != "" {
		q.Set("capability", capability)
	}
	if aliveOnly {
		q.Set("alive", "true")
	}
	path := "/atp/agents"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	out := map[string]Agent{}
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Message is a message to send. Payload is any JSON object (see the ATP
// translation rules); leave MessageID empty for a random one.
type Message struct {
	MessageID      string         `json:"message_id"`
	Sender         string         `json:"sender"`
	Receiver       string         `json:"receiver"`
	Type           string         `json:"type"`
	TTL            time.Duration  `json:"-"`
	CorrelationID  string         `json:"correlation_id,omitempty"`
	ConversationID string         `json:"conversation_id,omitempty"`
	Payload        any            `json:"payload"`
	Metadata       map[string]any `json:"metadata,omitempty"`
}

// Envelope is an ATP envelope as the hub delivers it.
type Envelope struct {
	ATPVersion     string          `json:"atp_version"`
	MessageID      string          `json:"message_id"`
	Sender         string          `json:"sender"`
	Receiver       string          `json:"receiver"`
	Type           string          `json:"type"`
	Timestamp      float64         `json:"timestamp"`
	TTLMs          int64           `json:"ttl_ms"`
	CorrelationID  *string         `json:"correlation_id"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Payload        json.RawMessage `json:"payload"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// SendResult is the hub's answer to a send.
type SendResult struct {
	Status    string `json:"status"` // queued, or a terminal status when the send waited
	MessageID string `json:"message_id"`
	// Receipt is the receiver's reply once delivered (JSON null before).
	Receipt json.RawMessage `json:"receipt"`
	// Duplicate is true when the hub already had this message (same id,
	// sender, receiver and content): sent before by the caller, or, when
	// Attempts is over 1, by an earlier attempt of this Send whose answer
	// was lost. Either way the message is stored once. The id reused for
	// another receiver or other content is refused (409
	// message_id_conflict).
	Duplicate bool `json:"duplicate"`
	// Attempts is how many requests this Send made (1 unless it retried).
	Attempts int `json:"-"`
}

// NewID returns a new message id: 32 hex digits of a UUIDv7 (RFC 9562),
// which grows with time — cheaper for the hub to index than a random id.
func NewID() string { return msgid.New() }

// Send sends a message and returns once the hub has stored it (status
// "queued"), or a terminal status when wait > 0 and the message ended within
// it. A failure that may be passing is retried with the same message id
// (see WithRetries).
func (c *Client) Send(ctx context.Context, m Message, wait ...time.Duration) (*SendResult, error) {
	if m.MessageID == "" {
		m.MessageID = NewID()
	}
	if m.Payload == nil {
		m.Payload = map[string]any{}
	}
	body := struct {
		ATPVersion string  `json:"atp_version"`
		Timestamp  float64 `json:"timestamp"`
		TTLMs      *int64  `json:"ttl_ms,omitempty"`
		Message
	}{ATPVersion: "1.0", Timestamp: float64(time.Now().UnixMicro()) / 1e6, Message: m}
	if m.TTL > 0 {
		ms := m.TTL.Milliseconds()
		body.TTLMs = &ms
	}
	path := "/atp/send"
	if len(wait) > 0 && wait[0] > 0 {
		path += fmt.Sprintf("?wait_ms=%d", wait[0].Milliseconds())
	}
	for attempt := 1; ; attempt++ {
		var out SendResult
		err := c.do(ctx, http.MethodPost, path, body, &out)
		if err == nil {
			out.Attempts = attempt
			return &out, nil
		}
		wait, again := retryAfter(err, attempt)
		if !again || attempt > c.retries || !waitFor(ctx, wait) {
			if attempt > 1 {
				return nil, fmt.Errorf("send %s: gave up after %d attempts: %w", m.MessageID, attempt, err)
			}
			return nil, err
		}
	}
}

// Backoff between Send's attempts: retryBase before the first retry,
// doubling up to retryMax, or what the hub's Retry-After asks up to
// retryAfterMax.
const (
	retryBase     = 100 * time.Millisecond
	retryMax      = 2 * time.Second
	retryAfterMax = 30 * time.Second
)

// retryAfter says whether err, the failure of attempt, may pass, and how
// long to wait before trying again.
func retryAfter(err error, attempt int) (time.Duration, bool) {
	var e *Error
	switch {
	case errors.Is(err, ErrUnavailable):
	case errors.As(err, &e):
		switch e.StatusCode {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			if e.RetryAfter > 0 {
				return min(e.RetryAfter, retryAfterMax), true
			}
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusInsufficientStorage:
		default:
			return 0, false
		}
	default:
		return 0, false
	}
	d := min(retryBase<<(attempt-1), retryMax)
	return d/2 + rand.N(d/2+1), true // jitter: callers that failed together do not retry together
}

// waitFor sleeps for d and reports true, or reports false at once when ctx
// would end before d has passed.
func waitFor(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Receipt is a message's transport receipt.
type Receipt struct {
	MessageID   string          `json:"message_id"`
	Status      string          `json:"status"`
	Receipt     json.RawMessage `json:"receipt"` // the receiver's reply once delivered, else null
	Sender      string          `json:"sender"`
	Receiver    string          `json:"receiver"`
	Attempts    int             `json:"attempts"`
	Code        int             `json:"code"`
	LastError   string          `json:"last_error"`
	NextAttempt float64         `json:"next_attempt"`
	ExpiresAt   float64         `json:"expires_at"`
	History     []struct {
		At     time.Time `json:"at"`
		Status string    `json:"status"`
		Detail string    `json:"detail"`
	} `json:"history"`
}

// Terminal reports whether the receipt's status is final.
func (r *Receipt) Terminal() bool { return r.Status != "queued" }

// Receipt fetches a message's receipt.
func (c *Client) Receipt(ctx context.Context, messageID string) (*Receipt, error) {
	var out Receipt
	if err := c.do(ctx, http.MethodGet, "/atp/receipts/"+url.PathEscape(messageID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitReceipt polls until the message's receipt is terminal or ctx ends.
func (c *Client) WaitReceipt(ctx context.Context, messageID string) (*Receipt, error) {
	delay := 20 * time.Millisecond
	for {
		rc, err := c.Receipt(ctx, messageID)
		if err != nil {
			return nil, err
		}
		if rc.Terminal() {
			return rc, nil
		}
		select {
		case <-ctx.Done():
			return rc, ctx.Err()
		case <-time.After(delay):
		}
		if delay < 500*time.Millisecond {
			delay *= 2
		}
	}
}

// WaitResult waits for the first message sent with correlation_id =
// messageID (the business result, kept apart from the receipt).
func (c *Client) WaitResult(ctx context.Context, messageID string) (*Envelope, error) {
	for {
		var out struct {
			Results []Envelope `json:"results"`
		}
		if err := c.do(ctx, http.MethodGet, "/atp/results/"+url.PathEscape(messageID)+"?wait_ms=25000", nil, &out); err != nil {
			return nil, err
		}
		if len(out.Results) > 0 {
			return &out.Results[0], nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// Pull fetches up to limit queued messages. With ack the messages stay
// leased for visibility until Ack (at-least-once); without, the hub counts
// them delivered at once.
func (c *Client) Pull(ctx context.Context, agentID string, limit int, manualAck bool, visibility time.Duration) ([]Envelope, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if manualAck {
		q.Set("ack", "manual")
		if visibility > 0 {
			q.Set("visibility_ms", fmt.Sprint(visibility.Milliseconds()))
		}
	}
	var out struct {
		Messages []Envelope `json:"messages"`
	}
	path := "/atp/pending/" + url.PathEscape(agentID)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Ack acknowledges pulled messages.
func (c *Client) Ack(ctx context.Context, agentID string, ids ...string) (int, error) {
	var out struct {
		Acked int `json:"acked"`
	}
	err := c.do(ctx, http.MethodPost, "/atp/ack", map[string]any{"agent_id": agentID, "message_ids": ids}, &out)
	return out.Acked, err
}

// DeadLetters lists dead letters (admin token).
func (c *Client) DeadLetters(ctx context.Context, receiver string, limit int) ([]json.RawMessage, error) {
	q := url.Values{}
	if receiver != "" {
		q.Set("receiver", receiver)
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	var out struct {
		DeadLetters []json.RawMessage `json:"dead_letters"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/dlq?"+q.Encode(), nil, &out)
	return out.DeadLetters, err
}

// Replay re-queues a dead letter (admin token).
func (c *Client) Replay(ctx context.Context, messageID string, ttl time.Duration) (json.RawMessage, error) {
	path := "/v1/dlq/" + url.PathEscape(messageID) + "/replay"
	if ttl > 0 {
		path += fmt.Sprintf("?ttl_ms=%d", ttl.Milliseconds())
	}
	var out json.RawMessage
	err := c.do(ctx, http.MethodPost, path, nil, &out)
	return out, err
}
