package amp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed amp-spec.json
var specDocument []byte

// SpecDocumentJSON returns the AMP 0.1 document object served at
// GET /v4/amp and as the MCP resource amp://v4/amp.
func SpecDocumentJSON() []byte { return bytes.Clone(specDocument) }

// SpecResourceURI is the URI under which MCP servers should expose the
// spec document.
const SpecResourceURI = "amp://v4/amp"

// SpecDocument is the typed view of the spec document's main fields.
type SpecDocument struct {
	Spec           string `json:"spec"`
	Title          string `json:"title"`
	Implementation string `json:"implementation"`
	Objects        struct {
		Events []Event  `json:"events"`
		Blocks []Block  `json:"blocks"`
		Gates  []Gate   `json:"gates"`
		State  []string `json:"state"`
	} `json:"objects"`
	Hooks     []string          `json:"hooks"`
	Endpoints map[string]string `json:"endpoints"`
	Note      string            `json:"note"`
}

// Spec decodes the embedded spec document.
func Spec() (SpecDocument, error) {
	var d SpecDocument
	if err := json.Unmarshal(specDocument, &d); err != nil {
		return SpecDocument{}, fmt.Errorf("amp: spec document: %w", err)
	}
	return d, nil
}
