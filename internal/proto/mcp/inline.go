package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// An answer can come back two ways: as a message correlated to the one
// sent (the receiver sends it later), or inline, in the receiver's
// response to the delivery itself, which the relay keeps as the receipt's
// reply. The inline way is how the ATP tutorial's worker answers
// ({"status": "accepted", "result": {"text": …}}), and how the A2A
// deliverer records a remote agent that answered synchronously (the same
// "result", built from the agent's parts). The result is an ATP payload:
// {"text": …} is one text part, an object with a "parts" array of
// canonical parts is those parts, any other object is one data part.

// inlineAnswer is the answer in rc's reply, as a message from the
// receiver to the sender correlated to the message, or nil when the
// message was not delivered or the receiver answered nothing but an
// acknowledgement.
func inlineAnswer(rc *core.Receipt) *core.Message {
	if rc.Status != core.StatusDelivered || len(rc.Reply) == 0 {
		return nil
	}
	var reply struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(rc.Reply, &reply) != nil {
		return nil
	}
	parts := payloadParts(reply.Result)
	if len(parts) == 0 {
		return nil
	}
	return &core.Message{ID: "", Sender: rc.Receiver, Receiver: rc.Sender, Type: "task.result",
		CorrelationID: rc.MessageID, Parts: parts, ReceivedAt: rc.UpdatedAt}
}

// payloadParts reads an inline result as canonical parts (none for null,
// an empty object or a value that is not an object).
func payloadParts(raw json.RawMessage) []core.Part {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || len(fields) == 0 {
		return nil
	}
	if ps, ok := fields["parts"]; ok {
		var parts []core.Part
		if json.Unmarshal(ps, &parts) == nil && len(parts) > 0 && knownKinds(parts) {
			return parts
		}
	}
	if t, ok := fields["text"]; ok && len(fields) == 1 {
		var s string
		if json.Unmarshal(t, &s) == nil {
			return []core.Part{{Kind: core.PartText, Text: s}}
		}
	}
	return []core.Part{{Kind: core.PartData, Data: append(json.RawMessage(nil), raw...)}}
}

func knownKinds(ps []core.Part) bool {
	for _, p := range ps {
		switch p.Kind {
		case core.PartText, core.PartCode, core.PartData, core.PartImage, core.PartFile:
		default:
			return false
		}
	}
	return true
}

// renderText is a message's content as text for a model to read: its text
// parts, code in fences, data as JSON, and a short note for each part
// that is not text (an image or file, by name, type and size or URL).
func renderText(ps []core.Part) string {
	var b strings.Builder
	for _, p := range ps {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch p.Kind {
		case core.PartText:
			b.WriteString(p.Text)
		case core.PartCode:
			b.WriteString("```" + p.Language + "\n" + p.Text + "\n```")
		case core.PartData:
			b.Write(p.Data)
		case core.PartImage, core.PartFile:
			b.WriteString(partNote(p))
		}
	}
	return b.String()
}

// partNote is the short note standing for an image or file part.
func partNote(p core.Part) string {
	var attrs []string
	if p.Name != "" {
		attrs = append(attrs, p.Name)
	}
	if p.MediaType != "" {
		attrs = append(attrs, p.MediaType)
	}
	switch {
	case p.URL != "":
		attrs = append(attrs, p.URL)
	case len(p.Bytes) > 0:
		attrs = append(attrs, fmt.Sprintf("%d bytes", len(p.Bytes)))
	}
	return fmt.Sprintf("[%s attached: %s]", p.Kind, strings.Join(attrs, ", "))
}

// renderMessage is a message as one block of text: who sent it, in which
// conversation, answering what, and its content.
func renderMessage(m *core.Message) string {
	head := fmt.Sprintf("From %s (message %s, type %s", m.Sender, m.ID, m.Type)
	if m.ConversationID != "" {
		head += ", conversation " + m.ConversationID
	}
	if m.CorrelationID != "" {
		head += ", answering " + m.CorrelationID
	}
	return head + "):\n" + renderText(m.Parts)
}
