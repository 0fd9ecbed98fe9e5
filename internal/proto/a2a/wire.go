package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Version is an A2A protocol version spoken on the wire.
type Version string

// The protocol versions this adapter speaks.
const (
	V03 Version = "0.3"
	V10 Version = "1.0"
)

// ErrVersion means an A2A-Version the hub does not speak.
var ErrVersion = errors.New("unsupported A2A version")

// ParseVersion maps an A2A-Version header value to a version: empty means
// 0.3 (as the specification says), any 0.3.x is 0.3, any 1.x is 1.0.
func ParseVersion(h string) (Version, error) {
	h = strings.TrimSpace(h)
	switch {
	case h == "":
		return V03, nil
	case h == "0.3" || strings.HasPrefix(h, "0.3."):
		return V03, nil
	case h == "1" || h == "1.0" || strings.HasPrefix(h, "1."):
		return V10, nil
	}
	return "", fmt.Errorf("A2A-Version %q (this hub speaks 1.0 and 0.3): %w", h, ErrVersion)
}

// Metadata keys the adapter puts on relayed messages, and reads back from
// results and part metadata.
const (
	MetaTaskID    = "a2a_task_id"
	MetaContextID = "a2a_context_id"
	MetaMessageID = "a2a_message_id"
	// MetaState on a result message sets the task state it leads to
	// (completed when absent): working, input-required, failed, …
	MetaState = "a2a_state"
	// metaKind and metaLanguage keep a canonical code part's identity on an
	// A2A text part, so that code survives a round trip.
	metaKind     = "switchboard_kind"
	metaLanguage = "language"
	// dataCompat marks a v0.3 data part that wraps a non-object value as
	// {"value": …} (the @a2a-js/sdk convention).
	dataCompat = "data_part_compat"
)

// ---- canonical parts ⇄ A2A parts ----

// PartsToCore maps A2A parts to canonical parts: text → text (code when its
// metadata says so), raw bytes or url → image (image/* media types) or
// file, data → data. It refuses an empty list or a part without content.
func PartsToCore(ps []*sdk.Part) ([]core.Part, error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("message has no parts: %w", core.ErrInvalid)
	}
	out := make([]core.Part, 0, len(ps))
	for i, p := range ps {
		if p == nil || p.Content == nil {
			return nil, fmt.Errorf("part %d has no content: %w", i, core.ErrInvalid)
		}
		meta := cloneMeta(p.Metadata)
		var cp core.Part
		switch c := p.Content.(type) {
		case sdk.Text:
			cp = core.Part{Kind: core.PartText, Text: string(c)}
			if k, _ := meta[metaKind].(string); k == string(core.PartCode) {
				cp.Kind = core.PartCode
				cp.Language, _ = meta[metaLanguage].(string)
				delete(meta, metaKind)
				delete(meta, metaLanguage)
			}
			if p.MediaType != "" && cp.Kind == core.PartText && p.MediaType != "text/plain" {
				cp.MediaType = p.MediaType
			}
		case sdk.Raw:
			cp = core.Part{Kind: fileKind(p.MediaType), MediaType: p.MediaType, Name: p.Filename, Bytes: []byte(c)}
		case sdk.URL:
			if c == "" {
				return nil, fmt.Errorf("part %d has an empty url: %w", i, core.ErrInvalid)
			}
			cp = core.Part{Kind: fileKind(p.MediaType), MediaType: p.MediaType, Name: p.Filename, URL: string(c)}
		case sdk.Data:
			b, err := json.Marshal(c.Value)
			if err != nil {
				return nil, fmt.Errorf("part %d data: %v: %w", i, err, core.ErrInvalid)
			}
			cp = core.Part{Kind: core.PartData, Data: b, MediaType: p.MediaType}
		default:
			return nil, fmt.Errorf("part %d has unknown content %T: %w", i, c, core.ErrInvalid)
		}
		if len(meta) > 0 {
			cp.Meta = meta
		}
		out = append(out, cp)
	}
	return out, nil
}

func fileKind(mediaType string) core.PartKind {
	if strings.HasPrefix(mediaType, "image/") {
		return core.PartImage
	}
	return core.PartFile
}

// PartsFromCore maps canonical parts to A2A parts (the inverse of
// PartsToCore): code becomes a text part whose metadata keeps its kind and
// language.
func PartsFromCore(ps []core.Part) []*sdk.Part {
	out := make([]*sdk.Part, 0, len(ps))
	for _, p := range ps {
		meta := cloneMeta(p.Meta)
		var ap *sdk.Part
		switch p.Kind {
		case core.PartCode:
			if meta == nil {
				meta = map[string]any{}
			}
			meta[metaKind] = string(core.PartCode)
			if p.Language != "" {
				meta[metaLanguage] = p.Language
			}
			ap = &sdk.Part{Content: sdk.Text(p.Text)}
		case core.PartImage, core.PartFile:
			if p.URL != "" {
				ap = &sdk.Part{Content: sdk.URL(p.URL)}
			} else {
				ap = &sdk.Part{Content: sdk.Raw(append([]byte{}, p.Bytes...))}
			}
			ap.Filename, ap.MediaType = p.Name, p.MediaType
		case core.PartData:
			var v any
			if len(p.Data) == 0 || json.Unmarshal(p.Data, &v) != nil {
				v = nil
			}
			ap = &sdk.Part{Content: sdk.Data{Value: v}, MediaType: p.MediaType}
		default: // text and anything unknown
			ap = &sdk.Part{Content: sdk.Text(p.Text), MediaType: p.MediaType}
		}
		if len(meta) > 0 {
			ap.Metadata = meta
		}
		out = append(out, ap)
	}
	return out
}

func cloneMeta(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ---- v0.3 wire shapes ----

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

type v03StatusUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    v03Status      `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type v03ArtifactUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  v03Artifact    `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type v03Auth struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

type v03PushConfig struct {
	ID             string   `json:"id,omitempty"`
	URL            string   `json:"url"`
	Token          string   `json:"token,omitempty"`
	Authentication *v03Auth `json:"authentication,omitempty"`
}

type v03TaskPushConfig struct {
	TaskID                 string        `json:"taskId"`
	PushNotificationConfig v03PushConfig `json:"pushNotificationConfig"`
}

var v03States = map[sdk.TaskState]string{
	sdk.TaskStateSubmitted:     "submitted",
	sdk.TaskStateWorking:       "working",
	sdk.TaskStateInputRequired: "input-required",
	sdk.TaskStateAuthRequired:  "auth-required",
	sdk.TaskStateCompleted:     "completed",
	sdk.TaskStateFailed:        "failed",
	sdk.TaskStateCanceled:      "canceled",
	sdk.TaskStateRejected:      "rejected",
	sdk.TaskStateUnspecified:   "unknown",
}

// ParseState reads a task state in either version's spelling
// ("TASK_STATE_COMPLETED" or "completed", also "input_required").
func ParseState(s string) (sdk.TaskState, bool) {
	up := sdk.TaskState(strings.ToUpper(strings.TrimSpace(s)))
	if _, ok := v03States[up]; ok && up != sdk.TaskStateUnspecified {
		return up, true
	}
	low := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	for st, name := range v03States {
		if name == low && st != sdk.TaskStateUnspecified {
			return st, true
		}
	}
	return "", false
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
		meta[dataCompat] = true
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
		if f, _ := meta[dataCompat].(bool); f {
			if inner, ok := v["value"]; ok {
				val = inner
			}
			delete(meta, dataCompat)
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

func statusToV03(s sdk.TaskStatus) v03Status {
	out := v03Status{State: v03States[s.State], Message: messageToV03(s.Message)}
	if out.State == "" {
		out.State = "unknown"
	}
	if s.Timestamp != nil {
		out.Timestamp = s.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return out
}

func statusFromV03(s v03Status) (sdk.TaskStatus, error) {
	st, ok := ParseState(s.State)
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

func artifactToV03(a *sdk.Artifact) v03Artifact {
	out := v03Artifact{ArtifactID: string(a.ID), Name: a.Name, Description: a.Description, Metadata: a.Metadata,
		Extensions: a.Extensions, Parts: make([]v03Part, 0, len(a.Parts))}
	for _, p := range a.Parts {
		out.Parts = append(out.Parts, partToV03(p))
	}
	return out
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

func taskToV03(t *sdk.Task) *v03Task {
	out := &v03Task{Kind: "task", ID: string(t.ID), ContextID: t.ContextID, Status: statusToV03(t.Status), Metadata: t.Metadata}
	for _, m := range t.History {
		out.History = append(out.History, *messageToV03(m))
	}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, artifactToV03(a))
	}
	return out
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

func pushToV03(c *sdk.PushConfig) v03TaskPushConfig {
	out := v03TaskPushConfig{TaskID: string(c.TaskID), PushNotificationConfig: v03PushConfig{ID: c.ID, URL: c.URL, Token: c.Token}}
	if c.Auth != nil {
		out.PushNotificationConfig.Authentication = &v03Auth{Schemes: []string{c.Auth.Scheme}, Credentials: c.Auth.Credentials}
	}
	return out
}

func pushFromV03(taskID string, c v03PushConfig) *sdk.PushConfig {
	out := &sdk.PushConfig{TaskID: sdk.TaskID(taskID), ID: c.ID, URL: c.URL, Token: c.Token}
	if c.Authentication != nil && len(c.Authentication.Schemes) > 0 {
		out.Auth = &sdk.PushAuthInfo{Scheme: c.Authentication.Schemes[0], Credentials: c.Authentication.Credentials}
	}
	return out
}

// EncodeTask renders a task in version v's JSON.
func EncodeTask(v Version, t *sdk.Task) any {
	if v == V03 {
		return taskToV03(t)
	}
	return t
}

// EncodeMessage renders a message in version v's JSON.
func EncodeMessage(v Version, m *sdk.Message) any {
	if v == V03 {
		return messageToV03(m)
	}
	return m
}

// DecodeMessage reads a message in version v's JSON.
func DecodeMessage(v Version, raw json.RawMessage) (*sdk.Message, error) {
	if v == V03 {
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
func DecodeSendResult(v Version, raw json.RawMessage) (*sdk.Task, *sdk.Message, error) {
	if v == V03 {
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
			m, err := DecodeMessage(V03, raw)
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
