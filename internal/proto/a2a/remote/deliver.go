package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/payload"
	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
)

// maxAnswer bounds how much of a remote answer is read.
const maxAnswer = 4 << 20

// extraKey is the key of the remote card's CardInfo in core.Card.Extra.
const extraKey = "a2a_remote"

// Info returns the remote card info kept in an agent's card, if any.
func Info(a *core.Agent) (*CardInfo, bool) {
	if len(a.Card.Extra) == 0 {
		return nil, false
	}
	var x map[string]json.RawMessage
	if json.Unmarshal(a.Card.Extra, &x) != nil || len(x[extraKey]) == 0 {
		return nil, false
	}
	var ci CardInfo
	if json.Unmarshal(x[extraKey], &ci) != nil || ci.RPCURL == "" {
		return nil, false
	}
	return &ci, true
}

// Deliverer sends messages to remote A2A agents.
type Deliverer struct {
	Client *http.Client
}

// New returns a deliverer using client (a default with a 30s timeout if
// nil; each attempt is also bounded by the scheduler's deadline).
func New(client *http.Client) *Deliverer {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &Deliverer{Client: client}
}

// Deliver implements core.Deliverer.
func (d *Deliverer) Deliver(ctx context.Context, a *core.Agent, m *core.Message) core.Delivery {
	target, version := a.Endpoint.URL, a2a.V10
	if ci, ok := Info(a); ok {
		target, version = ci.RPCURL, ci.Version
	}
	body, err := EncodeSend(version, m)
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusUnsupportedMediaType, Err: err, Detail: "cannot encode for receiver"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusBadRequest, Err: err, Detail: "bad endpoint"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", string(version))
	req.Header.Set("User-Agent", "switchboard-a2a")
	if m.TraceParent != "" {
		req.Header.Set("traceparent", m.TraceParent)
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRetry, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRetry, Code: resp.StatusCode, Err: fmt.Errorf("read answer: %w", err)}
	}
	return Classify(version, resp.StatusCode, raw)
}

// EncodeSend builds the JSON-RPC request that sends m in version v.
func EncodeSend(v a2a.Version, m *core.Message) ([]byte, error) {
	ctxID, _ := m.Metadata[a2a.MetaContextID].(string)
	if ctxID == "" {
		ctxID = m.ConversationID
	}
	msg := &sdk.Message{ID: m.ID, Role: sdk.MessageRoleUser, ContextID: ctxID, Parts: a2a.PartsFromCore(m.Parts),
		Metadata: map[string]any{"switchboard_sender": m.Sender, "switchboard_message_id": m.ID}}
	if id, ok := m.Metadata[a2a.MetaMessageID].(string); ok && id != "" {
		// The messageId the A2A client gave, when the message came from
		// one: agents that act on it (test agents do) see it.
		msg.Metadata[a2a.MetaMessageID] = id
	}
	if len(msg.Parts) == 0 {
		return nil, errors.New("message has no parts")
	}
	method := "SendMessage"
	cfg := map[string]any{"returnImmediately": false}
	if v == a2a.V03 {
		method, cfg = "message/send", map[string]any{"blocking": true}
	}
	return json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": method,
		"params": map[string]any{"message": EncodeMessage(v, msg), "configuration": cfg},
	})
}

// rpcError is a JSON-RPC error object of a remote answer.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// codeInternal is JSON-RPC's internal error: a remote agent's trouble,
// worth retrying.
const codeInternal = -32603

// Classify maps a remote JSON-RPC answer to a delivery outcome and the
// Reply described in the package documentation.
func Classify(v a2a.Version, status int, raw []byte) core.Delivery {
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return core.Delivery{Kind: core.OutcomeRetry, Code: status, Err: fmt.Errorf("remote agent answered %d", status)}
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || (resp.Error == nil && len(resp.Result) == 0) {
		if status < 200 || status >= 300 {
			return core.Delivery{Kind: core.OutcomeRejected, Code: status, Detail: fmt.Sprintf("remote agent answered %d", status)}
		}
		return core.Delivery{Kind: core.OutcomeRetry, Code: status, Err: errors.New("remote agent's answer is not a JSON-RPC response")}
	}
	if e := resp.Error; e != nil {
		if e.Code == codeInternal {
			return core.Delivery{Kind: core.OutcomeRetry, Code: status, Err: fmt.Errorf("remote agent: %s (%d)", e.Message, e.Code)}
		}
		reply, _ := json.Marshal(map[string]any{"status": "rejected", "error": e})
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusUnprocessableEntity, Reply: reply,
			Detail: fmt.Sprintf("remote agent refused: %s (%d)", e.Message, e.Code)}
	}
	task, msg, err := DecodeSendResult(v, resp.Result)
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusBadGateway, Err: err, Detail: "invalid agent response"}
	}
	rep := map[string]any{"status": "accepted"}
	var parts []*sdk.Part
	if task != nil {
		rep["task"], rep["state"] = task, task.Status.State
		for _, a := range task.Artifacts {
			parts = append(parts, a.Parts...)
		}
		if len(parts) == 0 && task.Status.Message != nil {
			parts = task.Status.Message.Parts
		}
		switch task.Status.State {
		case sdk.TaskStateFailed, sdk.TaskStateCanceled:
			rep["status"] = "failed"
		case sdk.TaskStateRejected:
			rep["status"] = "rejected"
		}
	} else {
		rep["message"], rep["state"] = msg, sdk.TaskStateCompleted
		parts = msg.Parts
	}
	if len(parts) > 0 {
		if cps, err := a2a.PartsToCore(parts); err == nil {
			if p, err := payload.FromParts(cps); err == nil {
				rep["result"] = p
			}
		}
	}
	reply, _ := json.Marshal(rep)
	if rep["status"] == "rejected" {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusUnprocessableEntity, Reply: reply, Detail: "remote agent rejected the task"}
	}
	return core.Delivery{Kind: core.OutcomeDelivered, Code: status, Reply: reply}
}
