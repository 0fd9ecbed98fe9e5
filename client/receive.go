package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Reply is a handler's answer to a delivered message. It becomes the
// message's receipt body at the hub; put the business result in Result, or
// send it later as a separate message with CorrelationID set.
type Reply struct {
	Status string `json:"status"`           // accepted (default) or rejected
	Code   int    `json:"code,omitempty"`   // the rejection's code
	Detail string `json:"detail,omitempty"` // a short note for the receipt
	Result any    `json:"result,omitempty"` // kept as the receipt's reply
}

// Reject returns a rejection reply with a code.
func Reject(code int, detail string) Reply {
	return Reply{Status: "rejected", Code: code, Detail: detail}
}

// HandlerFunc handles one delivered message. An error asks the hub to retry
// later (the delivery counts as failed).
type HandlerFunc func(ctx context.Context, env *Envelope) (Reply, error)

// Dedup remembers the outcome of recently handled message ids so that a
// redelivery (the hub delivers at least once) is answered without handling
// it twice. A message id is claimed before its handler runs: a duplicate
// that arrives while the first delivery is still being handled waits for
// it and answers with its outcome. Only a reply is remembered; a handler
// that failed (returned an error or panicked) releases the id, so a later
// redelivery runs the handler again.
type Dedup struct {
	mu   sync.Mutex
	ttl  time.Duration
	seen map[string]*dedupEntry
}

// dedupEntry is one claimed message id: in flight until done is closed,
// then the outcome to repeat (status and body), remembered from at.
type dedupEntry struct {
	done   chan struct{}
	status int
	body   []byte
	at     time.Time
}

// NewDedup remembers ids for ttl.
func NewDedup(ttl time.Duration) *Dedup { return &Dedup{ttl: ttl, seen: map[string]*dedupEntry{}} }

// claim returns the entry for id and whether the caller claimed it (and
// must finish it). An entry not claimed may still be in flight: wait for
// its done channel before reading its outcome.
func (d *Dedup) claim(id string) (*dedupEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if e, ok := d.seen[id]; ok {
		if !d.expired(e, now) {
			return e, false
		}
		delete(d.seen, id)
	}
	if len(d.seen) > 100000 {
		for k, e := range d.seen {
			if d.expired(e, now) {
				delete(d.seen, k)
			}
		}
	}
	e := &dedupEntry{done: make(chan struct{})}
	d.seen[id] = e
	return e, true
}

// expired reports whether a finished entry is older than the ttl; an entry
// in flight never is. d.mu is held.
func (d *Dedup) expired(e *dedupEntry, now time.Time) bool {
	return !e.at.IsZero() && now.Sub(e.at) > d.ttl
}

// finish records the outcome of the claimed entry e for id and wakes the
// duplicates waiting for it. With remember false (the handler failed) the
// id is released for a later redelivery.
func (d *Dedup) finish(id string, e *dedupEntry, status int, body []byte, remember bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.status, e.body, e.at = status, body, time.Now()
	if !remember && d.seen[id] == e {
		delete(d.seen, id)
	}
	close(e.done)
}

// CallbackOptions configure a callback handler.
type CallbackOptions struct {
	// Verifier checks the hub's webhook signature; nil accepts unsigned
	// deliveries.
	Verifier interface {
		Verify(r *http.Request, body []byte) error
	}
	// Dedup defaults to a 10-minute memory.
	Dedup *Dedup
	// MaxBody bounds a delivery's size [8 MiB].
	MaxBody int64
	// OnDuplicate is called for each redelivery answered from memory or
	// waiting for the first delivery's outcome.
	OnDuplicate func(messageID string)
}

// CallbackHandler returns the http.Handler to register as an agent's
// callback_url: it decodes the ATP envelope, verifies the signature if
// configured, deduplicates by message id, calls h and answers with its Reply.
// A redelivery of a message already handled is answered with the same
// Reply; one that arrives while h is still handling the first delivery
// waits for it (or answers 503 if its own request ends first), so h runs
// once per message id even under concurrent redeliveries. An error from h
// answers 503, which makes the hub retry later.
func CallbackHandler(h HandlerFunc, o CallbackOptions) http.Handler {
	if o.Dedup == nil {
		o.Dedup = NewDedup(10 * time.Minute)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 8 << 20
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, o.MaxBody))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, Reject(413, "delivery too large"))
			return
		}
		if o.Verifier != nil {
			if err := o.Verifier.Verify(r, body); err != nil {
				writeJSON(w, http.StatusUnauthorized, Reject(401, err.Error()))
				return
			}
		}
		var env Envelope
		if err := json.Unmarshal(body, &env); err != nil || env.MessageID == "" {
			writeJSON(w, http.StatusBadRequest, Reject(400, "not an ATP envelope"))
			return
		}
		e, claimed := o.Dedup.claim(env.MessageID)
		if !claimed {
			if o.OnDuplicate != nil {
				o.OnDuplicate(env.MessageID)
			}
			select {
			case <-e.done:
				writeBody(w, e.status, e.body)
			case <-r.Context().Done():
				// The hub gave up on this attempt; it will deliver again.
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "error", "detail": "still being handled"})
			}
			return
		}
		status, body := http.StatusServiceUnavailable, errorBody("handler panicked")
		remember := false
		// Deferred so that duplicates waiting for this outcome are woken
		// even when the handler panics (net/http recovers the panic).
		defer func() { o.Dedup.finish(env.MessageID, e, status, body, remember) }()
		reply, err := h(r.Context(), &env)
		if err != nil {
			status, body = http.StatusServiceUnavailable, errorBody(err.Error())
			writeBody(w, status, body)
			return
		}
		if reply.Status == "" {
			reply.Status = "accepted"
		}
		b, _ := json.Marshal(struct {
			MessageID string `json:"message_id"`
			Reply
		}{env.MessageID, reply})
		status, body, remember = http.StatusOK, b, true
		writeBody(w, status, body)
	})
}

// errorBody is the answer to a delivery whose handler failed: the hub
// retries it later.
func errorBody(detail string) []byte {
	b, _ := json.Marshal(map[string]any{"status": "error", "detail": detail})
	return append(b, '\n')
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// PullLoop receives an agent's messages by pulling with acknowledgement:
// each message is handled, then acknowledged; a handler error leaves it to
// be delivered again after the visibility timeout. It returns when ctx
// ends.
func (c *Client) PullLoop(ctx context.Context, agentID string, h HandlerFunc, visibility time.Duration) error {
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	idle := 50 * time.Millisecond
	for ctx.Err() == nil {
		msgs, err := c.Pull(ctx, agentID, 100, true, visibility)
		if err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		var done []string
		for i := range msgs {
			if _, err := h(ctx, &msgs[i]); err == nil {
				done = append(done, msgs[i].MessageID)
			}
		}
		if len(done) > 0 {
			if _, err := c.Ack(ctx, agentID, done...); err != nil && ctx.Err() == nil {
				continue
			}
		}
		if len(msgs) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(idle):
			}
		}
	}
	return nil
}

// Stream receives an agent's messages over a live server-sent event stream
// (GET /atp/stream/{id}): each message is handled, then acknowledged (in
// batches, while the stream goes on); a handler error, or an
// acknowledgement that does not get through, leaves it to be delivered
// again after the visibility timeout. The stream reconnects after errors
// until ctx ends.
func (c *Client) Stream(ctx context.Context, agentID string, h HandlerFunc, visibility time.Duration) error {
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.streamOnce(ctx, agentID, h, visibility)
		if ctx.Err() != nil {
			return nil
		}
		var he *Error
		if errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500 && he.StatusCode != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
	return nil
}

func (c *Client) streamOnce(ctx context.Context, agentID string, h HandlerFunc, visibility time.Duration) error {
	url := fmt.Sprintf("%s/atp/stream/%s?visibility_ms=%d", c.base, agentID, visibility.Milliseconds())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // a stream lives as long as ctx
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		e := &Error{StatusCode: resp.StatusCode}
		_ = json.Unmarshal(b, e)
		return e
	}
	acks := c.startAcker(ctx, agentID)
	defer acks.flush()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var env Envelope
		if err := json.Unmarshal(data, &env); err != nil {
			continue
		}
		if _, err := h(ctx, &env); err == nil {
			acks.add(env.MessageID)
		}
	}
	return sc.Err()
}
