package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
// Anything else is ErrVersion.
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

// stateNames spells each task state as 0.3 did (and as results and
// replies may name them).
var stateNames = map[sdk.TaskState]string{
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
	if _, ok := stateNames[up]; ok && up != sdk.TaskStateUnspecified {
		return up, true
	}
	low := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	for st, name := range stateNames {
		if name == low && st != sdk.TaskStateUnspecified {
			return st, true
		}
	}
	return "", false
}
