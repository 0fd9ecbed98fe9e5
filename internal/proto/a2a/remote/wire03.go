package remote

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/proto/a2a"
)

// The A2A 0.3 JSON shapes of what a remote 0.3 agent is sent and answers
// (a message; a task or a message back). 1.0 uses the SDK's types.

func cloneMeta(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

type v03File struct {
	Bytes    *string `json:"bytes,omitempty"`
	URI      *string `json:"uri,omitempty"`
	Name     string  `json:"name,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
}

type v03Part struct {
	Kind     string          `json:"kind"`
	Text     *string         `json:"text,omitempty"`
	File     *v03File        `json:"file,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

type v03Message struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	Role             string         `json:"role"`
	Parts            []v03Part      `json:"parts"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

type v03Status struct {
	State     string      `json:"state"`
	Message   *v03Message `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

type v03Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []v03Part      `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

type v03Task struct {
	Kind      string         `json:"kind"`
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    v03Status      `json:"status"`
	History   []v03Message   `json:"history,omitempty"`
	Artifacts []v03Artifact  `json:"artifacts,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

func partToV03(p *sdk.Part) v03Part {
	meta := cloneMeta(p.Metadata)
	switch c := p.Content.(type) {
	case sdk.Text:
		s := string(c)
		return v03Part{Kind: "text", Text: &s, Metadata: meta}
	case sdk.Raw:
		b := base64.StdEncoding.EncodeToString(c)
		return v03Part{Kind: "file", File: &v03File{Bytes: &b, Name: p.Filename, MimeType: p.MediaType}, Metadata: meta}
	case sdk.URL:
		u := string(c)
		return v03Part{Kind: "file", File: &v03File{URI: &u, Name: p.Filename, MimeType: p.MediaType}, Metadata: meta}
	case sdk.Data:
		if _, ok := c.Value.(map[string]any); ok {
			b, _ := json.Marshal(c.Value)
			return v03Part{Kind: "data", Data: b, Metadata: meta}
		}
		b, _ := json.Marshal(map[string]any{"value": c.Value})
		if meta == nil {
			meta = map[string]any{}
		}
		meta["data_part_compat"] = true
		return v03Part{Kind: "data", Data: b, Metadata: meta}
	}
	s := ""
	return v03Part{Kind: "text", Text: &s, Metadata: meta}
}

func partFromV03(p v03Part) (*sdk.Part, error) {
	meta := cloneMeta(p.Metadata)
	switch p.Kind {
	case "text":
		if p.Text == nil {
			return nil, errors.New("text part without text")
		}
		return &sdk.Part{Content: sdk.Text(*p.Text), Metadata: meta}, nil
	case "file":
		if p.File == nil {
			return nil, errors.New("file part without file")
		}
		out := &sdk.Part{Filename: p.File.Name, MediaType: p.File.MimeType, Metadata: meta}
		switch {
		case p.File.Bytes != nil && p.File.URI != nil:
			return nil, errors.New("file part has both bytes and uri")
		case p.File.Bytes != nil:
			b, err := base64.StdEncoding.DecodeString(*p.File.Bytes)
			if err != nil {
				return nil, fmt.Errorf("file bytes are not base64: %v", err)
			}
			out.Content = sdk.Raw(b)
		case p.File.URI != nil && *p.File.URI != "":
			out.Content = sdk.URL(*p.File.URI)
		default:
			return nil, errors.New("file part without bytes or uri")
		}
		return out, nil
	case "data":
		d := bytes.TrimSpace(p.Data)
		if len(d) == 0 || d[0] != '{' {
			return nil, errors.New("data part must hold a JSON object")
		}
		var v map[string]any
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, fmt.Errorf("data part: %v", err)
		}
		var val any = v
		if f, _ := meta["data_part_compat"].(bool); f {
			if inner, ok := v["value"]; ok {
				val = inner
			}
			delete(meta, "data_part_compat")
			if len(meta) == 0 {
				meta = nil
			}
		}
		return &sdk.Part{Content: sdk.Data{Value: val}, Metadata: meta}, nil
	}
	return nil, fmt.Errorf("unknown part kind %q", p.Kind)
}

func messageToV03(m *sdk.Message) *v03Message {
	if m == nil {
		return nil
	}
	out := &v03Message{Kind: "message", MessageID: m.ID, Role: "agent", ContextID: m.ContextID, TaskID: string(m.TaskID),
		Metadata: m.Metadata, Extensions: m.Extensions, Parts: make([]v03Part, 0, len(m.Parts))}
	if m.Role == sdk.MessageRoleUser {
		out.Role = "user"
	}
	for _, t := range m.ReferenceTasks {
		out.ReferenceTaskIDs = append(out.ReferenceTaskIDs, string(t))
	}
	for _, p := range m.Parts {
		out.Parts = append(out.Parts, partToV03(p))
	}
	return out
}

func messageFromV03(m *v03Message) (*sdk.Message, error) {
	if m == nil {
		return nil, errors.New("message is required")
	}
	out := &sdk.Message{ID: m.MessageID, ContextID: m.ContextID, TaskID: sdk.TaskID(m.TaskID), Metadata: m.Metadata, Extensions: m.Extensions}
	switch m.Role {
	case "user":
		out.Role = sdk.MessageRoleUser
	case "agent":
		out.Role = sdk.MessageRoleAgent
	default:
		return nil, fmt.Errorf("message.role must be \"user\" or \"agent\", not %q", m.Role)
	}
	for _, t := range m.ReferenceTaskIDs {
		out.ReferenceTasks = append(out.ReferenceTasks, sdk.TaskID(t))
	}
	for i, p := range m.Parts {
		ap, err := partFromV03(p)
		if err != nil {
			return nil, fmt.Errorf("message.parts[%d]: %v", i, err)
		}
		out.Parts = append(out.Parts, ap)
	}
	return out, nil
}

func statusFromV03(s v03Status) (sdk.TaskStatus, error) {
	st, ok := a2a.ParseState(s.State)
	if !ok {
		return sdk.TaskStatus{}, fmt.Errorf("unknown task state %q", s.State)
	}
	out := sdk.TaskStatus{State: st}
	if s.Message != nil {
		m, err := messageFromV03(s.Message)
		if err != nil {
			return out, err
		}
		out.Message = m
	}
	if t, err := time.Parse(time.RFC3339Nano, s.Timestamp); err == nil {
		out.Timestamp = &t
	}
	return out, nil
}

func artifactFromV03(a v03Artifact) (*sdk.Artifact, error) {
	out := &sdk.Artifact{ID: sdk.ArtifactID(a.ArtifactID), Name: a.Name, Description: a.Description, Metadata: a.Metadata, Extensions: a.Extensions}
	for i, p := range a.Parts {
		ap, err := partFromV03(p)
		if err != nil {
			return nil, fmt.Errorf("artifact part %d: %v", i, err)
		}
		out.Parts = append(out.Parts, ap)
	}
	return out, nil
}

func taskFromV03(t *v03Task) (*sdk.Task, error) {
	st, err := statusFromV03(t.Status)
	if err != nil {
		return nil, err
	}
	out := &sdk.Task{ID: sdk.TaskID(t.ID), ContextID: t.ContextID, Status: st, Metadata: t.Metadata}
	for i := range t.History {
		m, err := messageFromV03(&t.History[i])
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, m)
	}
	for _, a := range t.Artifacts {
		aa, err := artifactFromV03(a)
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, aa)
	}
	return out, nil
}

// EncodeMessage renders a message in version v's JSON.
func EncodeMessage(v a2a.Version, m *sdk.Message) any {
	if v == a2a.V03 {
		return messageToV03(m)
	}
	return m
}

// DecodeMessage reads a message in version v's JSON.
func DecodeMessage(v a2a.Version, raw json.RawMessage) (*sdk.Message, error) {
	if v == a2a.V03 {
		var m v03Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		return messageFromV03(&m)
	}
	var m sdk.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeSendResult reads the result of a SendMessage (message/send) call in
// version v's JSON: exactly one of the task and the message is set.
func DecodeSendResult(v a2a.Version, raw json.RawMessage) (*sdk.Task, *sdk.Message, error) {
	if v == a2a.V03 {
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, nil, err
		}
		switch probe.Kind {
		case "task":
			var t v03Task
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, nil, err
			}
			task, err := taskFromV03(&t)
			return task, nil, err
		case "message":
			m, err := DecodeMessage(a2a.V03, raw)
			return nil, m, err
		}
		return nil, nil, fmt.Errorf("result kind %q is neither task nor message", probe.Kind)
	}
	var wrap struct {
		Task    *sdk.Task    `json:"task"`
		Message *sdk.Message `json:"message"`
	}
	if err := json.Unmarshal(raw, &wrap); err != nil {
		return nil, nil, err
	}
	if (wrap.Task == nil) == (wrap.Message == nil) {
		return nil, nil, errors.New("result must hold exactly one of task and message")
	}
	return wrap.Task, wrap.Message, nil
}
