// Package remote reaches remote A2A agents: a core.Deliverer for
// core.EndpointA2A that sends each message with an A2A JSON-RPC
// SendMessage (1.0) or message/send (0.3) call, and a Registrar that
// registers a remote agent on the hub from its agent card URL and keeps
// the card fresh.
//
// # Delivery
//
// The message becomes an A2A user message: messageId = the relay message
// id, contextId = metadata a2a_context_id or the conversation id, parts
// mapped by the A2A adapter's rules (a2a.PartsFromCore), metadata
// switchboard_sender and switchboard_message_id. The call is blocking
// (returnImmediately false / blocking true), with the A2A-Version header of
// the interface chosen from the card.
//
// The remote answer becomes the receipt's Reply:
//
//	{"status": "accepted"|"failed"|"rejected", "state": "TASK_STATE_…",
//	 "result": <ATP payload of the answer's parts>,
//	 "task": <remote task, 1.0 JSON> | "message": <remote message, 1.0 JSON>}
//
// "result" is built from the task's artifacts (or its status message) or
// the message's parts, so ATP, MAMP and MCP senders read the answer where
// they read any worker's result. A remote task in state rejected, and a
// JSON-RPC error other than internal, reject the message; HTTP 5xx, 408,
// 429, -32603 and network failures are retried by the scheduler.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
)

// Errors of card fetching, matched with errors.Is.
var (
	// ErrCardUnreachable means the card URL did not answer with a card.
	ErrCardUnreachable = errors.New("agent card unreachable")
	// ErrInvalidCard means the document is not a usable A2A agent card.
	ErrInvalidCard = errors.New("invalid agent card")
)

// CardInfo is what the hub keeps of a remote agent's card.
type CardInfo struct {
	CardURL     string          `json:"card_url"`
	RPCURL      string          `json:"rpc_url"`
	Version     a2a.Version     `json:"protocol_version"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	CardVersion string          `json:"version,omitempty"`
	Skills      []string        `json:"skills,omitempty"`
	Streaming   bool            `json:"streaming,omitempty"`
	Card        json.RawMessage `json:"card"`
	FetchedAt   time.Time       `json:"fetched_at"`
}

// NormalizeCardURL checks a card URL and completes a bare origin with the
// well-known path.
func NormalizeCardURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("card_url %q must be an absolute http(s) URL: %w", raw, ErrInvalidCard)
	}
	if u.User != nil {
		return "", fmt.Errorf("card_url must not carry credentials: %w", ErrInvalidCard)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/.well-known/agent-card.json"
	}
	return u.String(), nil
}

// FetchCard downloads and validates an agent card, reading at most max
// bytes; client's timeout bounds the call.
func FetchCard(ctx context.Context, client *http.Client, cardURL string, max int64) (*CardInfo, error) {
	cardURL, err := NormalizeCardURL(cardURL)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrInvalidCard)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %v: %w", cardURL, err, ErrCardUnreachable)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: answered %d: %w", cardURL, resp.StatusCode, ErrCardUnreachable)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %v: %w", cardURL, err, ErrCardUnreachable)
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("card is larger than %d bytes: %w", max, ErrInvalidCard)
	}
	info, err := ParseCard(body)
	if err != nil {
		return nil, err
	}
	info.CardURL = cardURL
	return info, nil
}

// ParseCard validates an agent card (1.0 or 0.3 shape) and picks its
// JSON-RPC interface, preferring protocol version 1.0.
func ParseCard(body []byte) (*CardInfo, error) {
	var c struct {
		Name                string `json:"name"`
		Description         string `json:"description"`
		Version             string `json:"version"`
		URL                 string `json:"url"`
		PreferredTransport  string `json:"preferredTransport"`
		ProtocolVersion     string `json:"protocolVersion"`
		SupportedInterfaces []struct {
			URL             string `json:"url"`
			ProtocolBinding string `json:"protocolBinding"`
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"supportedInterfaces"`
		AdditionalInterfaces []struct {
			URL       string `json:"url"`
			Transport string `json:"transport"`
		} `json:"additionalInterfaces"`
		Capabilities struct {
			Streaming bool `json:"streaming"`
		} `json:"capabilities"`
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("card is not a JSON object: %v: %w", err, ErrInvalidCard)
	}
	if strings.TrimSpace(c.Name) == "" {
		return nil, fmt.Errorf("card has no name: %w", ErrInvalidCard)
	}
	info := &CardInfo{Name: c.Name, Description: c.Description, CardVersion: c.Version, Streaming: c.Capabilities.Streaming,
		Card: append(json.RawMessage(nil), body...)}
	for _, s := range c.Skills {
		if s.ID != "" {
			info.Skills = append(info.Skills, s.ID)
		}
	}
	for _, it := range c.SupportedInterfaces {
		if !strings.EqualFold(it.ProtocolBinding, "JSONRPC") {
			continue
		}
		v, err := a2a.ParseVersion(it.ProtocolVersion)
		if err != nil {
			continue
		}
		if info.RPCURL == "" || (v == a2a.V10 && info.Version != a2a.V10) {
			info.RPCURL, info.Version = it.URL, v
		}
	}
	if info.RPCURL == "" && len(c.SupportedInterfaces) == 0 && c.URL != "" {
		if c.PreferredTransport == "" || strings.EqualFold(c.PreferredTransport, "JSONRPC") {
			info.RPCURL, info.Version = c.URL, a2a.V03
		} else {
			for _, it := range c.AdditionalInterfaces {
				if strings.EqualFold(it.Transport, "JSONRPC") {
					info.RPCURL, info.Version = it.URL, a2a.V03
					break
				}
			}
		}
	}
	if info.RPCURL == "" {
		return nil, fmt.Errorf("card offers no JSON-RPC interface of version 1.0 or 0.3: %w", ErrInvalidCard)
	}
	u, err := url.Parse(info.RPCURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("card's JSON-RPC url %q is not an absolute http(s) URL: %w", info.RPCURL, ErrInvalidCard)
	}
	return info, nil
}
