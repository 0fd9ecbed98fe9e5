package mamp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Content errors, matched with errors.Is. Each maps to its own error code
// in the HTTP answer (see docs/errors.md).
var (
	// ErrContent is a malformed content value or part.
	ErrContent = errors.New("invalid content")
	// ErrPartType is a part whose type MAMP does not define.
	ErrPartType = errors.New("unknown part type")
	// ErrBase64 is base64 data that does not decode.
	ErrBase64 = errors.New("invalid base64")
	// ErrMediaType is a declared media type that does not match the bytes.
	ErrMediaType = errors.New("media type does not match the data")
)

// Part types of MAMP content. "data" is a Switchboard extension that
// carries canonical structured-data parts (any JSON value) so that content
// from other protocols crosses MAMP without loss.
const (
	TypeText  = "text"
	TypeImage = "image"
	TypeCode  = "code"
	TypeFile  = "file"
	TypeData  = "data"
)

// known lists each part type's fields; any other field of a part is kept
// in the canonical part's Meta and written back on the way out.
var known = map[string][]string{
	TypeText:  {"type", "text"},
	TypeImage: {"type", "source", "name"},
	TypeCode:  {"type", "code", "language"},
	TypeFile:  {"type", "source", "name", "mime_type"},
	TypeData:  {"type", "data"},
}

func isKnown(typ, field string) bool {
	for _, f := range known[typ] {
		if f == field {
			return true
		}
	}
	return false
}

// ParseContent maps MAMP content (a string or an array of parts) to
// canonical parts. A string is one text part.
func ParseContent(raw json.RawMessage) ([]core.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("content is required: %w", ErrContent)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("content: %v: %w", err, ErrContent)
		}
		return []core.Part{{Kind: core.PartText, Text: s}}, nil
	case '[':
	default:
		return nil, fmt.Errorf("content must be a string or an array of parts: %w", ErrContent)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("content: %v: %w", err, ErrContent)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("content must have at least one part: %w", ErrContent)
	}
	parts := make([]core.Part, 0, len(items))
	for i, it := range items {
		p, err := parsePart(it)
		if err != nil {
			return nil, fmt.Errorf("content[%d]: %w", i, err)
		}
		parts = append(parts, p)
	}
	return parts, nil
}

func parsePart(raw json.RawMessage) (core.Part, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return core.Part{}, fmt.Errorf("a part must be a JSON object: %w", ErrContent)
	}
	typ, err := stringField(fields, "type", true)
	if err != nil {
		return core.Part{}, err
	}
	if _, ok := known[typ]; !ok {
		return core.Part{}, fmt.Errorf("part type %q (MAMP defines text, image, code, file; this hub adds data): %w", trunc(typ), ErrPartType)
	}
	var p core.Part
	switch typ {
	case TypeText:
		p.Kind = core.PartText
		if p.Text, err = stringField(fields, "text", true); err != nil {
			return p, err
		}
	case TypeCode:
		p.Kind = core.PartCode
		if p.Text, err = stringField(fields, "code", true); err != nil {
			return p, err
		}
		if p.Language, err = stringField(fields, "language", false); err != nil {
			return p, err
		}
	case TypeImage:
		p.Kind = core.PartImage
		if p.Name, err = stringField(fields, "name", false); err != nil {
			return p, err
		}
		if err := parseSource(fields, &p); err != nil {
			return p, err
		}
	case TypeFile:
		p.Kind = core.PartFile
		if p.Name, err = stringField(fields, "name", false); err != nil {
			return p, err
		}
		if p.MediaType, err = stringField(fields, "mime_type", false); err != nil {
			return p, err
		}
		if err := parseSource(fields, &p); err != nil {
			return p, err
		}
	case TypeData:
		p.Kind = core.PartData
		d, ok := fields["data"]
		if !ok || len(bytes.TrimSpace(d)) == 0 {
			return p, fmt.Errorf("data part needs a \"data\" field: %w", ErrContent)
		}
		p.Data = compact(d)
	}
	for k, v := range fields {
		if isKnown(typ, k) {
			continue
		}
		var x any
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			return p, fmt.Errorf("field %q: %v: %w", trunc(k), err, ErrContent)
		}
		if p.Meta == nil {
			p.Meta = map[string]any{}
		}
		p.Meta[k] = x
	}
	return p, nil
}

func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return append(json.RawMessage(nil), b...)
	}
	return buf.Bytes()
}

func stringField(fields map[string]json.RawMessage, name string, required bool) (string, error) {
	v, ok := fields[name]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		if required {
			return "", fmt.Errorf("field %q is required: %w", name, ErrContent)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("field %q must be a string: %w", name, ErrContent)
	}
	return s, nil
}

// source is an image or file source.
type source struct {
	Type      string `json:"type"`
	URL       string `json:"url,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
}

func parseSource(fields map[string]json.RawMessage, p *core.Part) error {
	raw, ok := fields["source"]
	if !ok {
		return fmt.Errorf("%s part needs a \"source\": %w", p.Kind, ErrContent)
	}
	var sf map[string]json.RawMessage
	if err := json.Unmarshal(raw, &sf); err != nil || sf == nil {
		return fmt.Errorf("source must be an object: %w", ErrContent)
	}
	var src source
	for k := range sf {
		switch k {
		case "type", "url", "media_type", "data":
		default:
			return fmt.Errorf("source field %q is not defined (type, url, media_type, data): %w", trunc(k), ErrContent)
		}
	}
	var err error
	if src.Type, err = stringField(sf, "type", true); err != nil {
		return err
	}
	if src.URL, err = stringField(sf, "url", false); err != nil {
		return err
	}
	if src.MediaType, err = stringField(sf, "media_type", false); err != nil {
		return err
	}
	if src.Data, err = stringField(sf, "data", false); err != nil {
		return err
	}
	// A file's type is mime_type; source.media_type is accepted as a
	// synonym and normalised into it.
	if src.MediaType != "" {
		if p.MediaType != "" && !sameType(p.MediaType, src.MediaType) {
			return fmt.Errorf("mime_type %q and source.media_type %q disagree: %w", p.MediaType, src.MediaType, ErrContent)
		}
		if p.MediaType == "" {
			p.MediaType = src.MediaType
		}
	}
	if p.MediaType != "" {
		if _, _, err := mime.ParseMediaType(p.MediaType); err != nil {
			return fmt.Errorf("media type %q is malformed: %w", trunc(p.MediaType), ErrContent)
		}
		if p.Kind == core.PartImage && !strings.HasPrefix(baseType(p.MediaType), "image/") {
			return fmt.Errorf("image media type %q is not image/*: %w", trunc(p.MediaType), ErrMediaType)
		}
	}
	switch src.Type {
	case "url":
		if src.Data != "" {
			return fmt.Errorf("a url source has no data: %w", ErrContent)
		}
		if err := checkURL(src.URL); err != nil {
			return err
		}
		p.URL = src.URL
	case "base64":
		if src.URL != "" {
			return fmt.Errorf("a base64 source has no url: %w", ErrContent)
		}
		if p.Kind == core.PartImage && p.MediaType == "" {
			return fmt.Errorf("a base64 image needs source.media_type: %w", ErrContent)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(src.Data)
		if err != nil {
			return fmt.Errorf("source.data: %v: %w", err, ErrBase64)
		}
		if len(b) == 0 {
			return fmt.Errorf("source.data is empty: %w", ErrContent)
		}
		if err := CheckMediaType(p.Kind, p.MediaType, b); err != nil {
			return err
		}
		p.Bytes = b
	default:
		return fmt.Errorf("source.type %q must be url or base64: %w", trunc(src.Type), ErrContent)
	}
	return nil
}

func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("source.url is required: %w", ErrContent)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("source.url %q must be an absolute http(s) URL: %w", trunc(s), ErrContent)
	}
	return nil
}

// baseType is a media type without parameters, lower-cased, with common
// aliases folded.
func baseType(mt string) string {
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	mt = strings.ToLower(strings.TrimSpace(mt))
	switch mt {
	case "image/jpg", "image/pjpeg":
		return "image/jpeg"
	case "image/vnd.microsoft.icon", "image/ico":
		return "image/x-icon"
	}
	return mt
}

func sameType(a, b string) bool { return baseType(a) == baseType(b) }

// signatureTypes are the media types recognised from their bytes; data
// declared as one of them must really be one.
var signatureTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/bmp": true,
	"image/x-icon": true, "image/tiff": true, "image/svg+xml": true, "application/pdf": true,
}

// Sniff returns the media type recognised from b's leading bytes: the
// answer of net/http.DetectContentType, completed with TIFF and SVG, and
// without parameters.
func Sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("II*\x00")) || bytes.HasPrefix(b, []byte("MM\x00*")):
		return "image/tiff"
	}
	t := baseType(http.DetectContentType(b))
	if (t == "text/xml" || t == "text/plain") && isSVG(b) {
		return "image/svg+xml"
	}
	return t
}

func isSVG(b []byte) bool {
	head := b
	if len(head) > 4096 {
		head = head[:4096]
	}
	return utf8.Valid(head) && bytes.Contains(bytes.ToLower(head), []byte("<svg"))
}

// CheckMediaType checks declared against the bytes of an image or file
// part:
//   - an image must declare image/*; if it is a type recognised from its
//     bytes (PNG, JPEG, GIF, WebP, BMP, ICO, TIFF, SVG) the bytes must be
//     that type, otherwise the bytes must not be recognisable as anything;
//   - a file declared as one of those types or as application/pdf must be
//     one; a file declared as anything else must not be an image or PDF;
//   - a file with no declared type is not checked.
func CheckMediaType(kind core.PartKind, declared string, b []byte) error {
	got := Sniff(b)
	want := baseType(declared)
	if want == "" {
		if kind == core.PartImage {
			return fmt.Errorf("an image needs a media type: %w", ErrContent)
		}
		return nil
	}
	if kind == core.PartImage && !strings.HasPrefix(want, "image/") {
		return fmt.Errorf("image media type %q is not image/*: %w", declared, ErrMediaType)
	}
	switch {
	case signatureTypes[want]:
		if got != want {
			return fmt.Errorf("declared %s but the data is %s: %w", want, describe(got), ErrMediaType)
		}
	case kind == core.PartImage:
		if got != "application/octet-stream" {
			return fmt.Errorf("declared %s but the data is %s: %w", want, describe(got), ErrMediaType)
		}
	default:
		if signatureTypes[got] {
			return fmt.Errorf("declared %s but the data is %s: %w", want, describe(got), ErrMediaType)
		}
	}
	return nil
}

func describe(t string) string {
	if t == "application/octet-stream" {
		return "unrecognised binary data"
	}
	return t
}

// wirePart is a MAMP part as written by the hub. Meta fields are added
// beside these.
type wirePart struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text,omitempty"`
	Code     *string         `json:"code,omitempty"`
	Language string          `json:"language,omitempty"`
	Name     string          `json:"name,omitempty"`
	MimeType string          `json:"mime_type,omitempty"`
	Source   *source         `json:"source,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// EncodeContent maps canonical parts to MAMP content, always in the array
// form. It fails on parts MAMP cannot express (an unknown kind, an image or
// file with neither URL nor bytes).
func EncodeContent(parts []core.Part) (json.RawMessage, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, p := range parts {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := encodePart(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

func encodePart(p core.Part) ([]byte, error) {
	var w wirePart
	switch p.Kind {
	case core.PartText:
		t := p.Text
		w = wirePart{Type: TypeText, Text: &t}
	case core.PartCode:
		c := p.Text
		w = wirePart{Type: TypeCode, Code: &c, Language: p.Language}
	case core.PartData:
		d := p.Data
		if len(bytes.TrimSpace(d)) == 0 {
			d = json.RawMessage("null")
		}
		w = wirePart{Type: TypeData, Data: d}
	case core.PartImage, core.PartFile:
		src := &source{}
		switch {
		case p.URL != "":
			src.Type, src.URL = "url", p.URL
		case len(p.Bytes) > 0:
			src.Type, src.Data = "base64", base64.StdEncoding.EncodeToString(p.Bytes)
		default:
			return nil, fmt.Errorf("%s part has neither url nor bytes: %w", p.Kind, ErrContent)
		}
		if p.Kind == core.PartImage {
			src.MediaType = p.MediaType
			w = wirePart{Type: TypeImage, Name: p.Name, Source: src}
		} else {
			w = wirePart{Type: TypeFile, Name: p.Name, MimeType: p.MediaType, Source: src}
		}
	default:
		return nil, fmt.Errorf("part kind %q: %w", p.Kind, ErrPartType)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(p.Meta))
	for k := range p.Meta {
		if !isKnown(w.Type, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return b, nil
	}
	sort.Strings(keys)
	b = b[:len(b)-1]
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(p.Meta[k])
		if err != nil {
			return nil, fmt.Errorf("meta %q: %w", k, err)
		}
		b = append(b, ',')
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, vb...)
	}
	return append(b, '}'), nil
}

// TextPart returns a canonical text part.
func TextPart(text string) core.Part { return core.Part{Kind: core.PartText, Text: text} }

// CodePart returns a canonical code part.
func CodePart(language, code string) core.Part {
	return core.Part{Kind: core.PartCode, Language: language, Text: code}
}

// MaxFileSize bounds the files ImagePart and FilePart read (the hub's
// request limit applies as well).
const MaxFileSize = 32 << 20

func readFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: %w", path, ErrContent)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s is %d bytes, more than %d: %w", path, st.Size(), MaxFileSize, ErrContent)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s is empty: %w", path, ErrContent)
	}
	return b, nil
}

// ImagePart reads an image file into a canonical image part carried as
// bytes. Its media type is recognised from the bytes (PNG, JPEG, GIF, WebP,
// BMP, ICO, TIFF, SVG); a file that is not a recognised image is refused
// with ErrMediaType.
func ImagePart(path string) (core.Part, error) {
	b, err := readFile(path)
	if err != nil {
		return core.Part{}, err
	}
	mt := Sniff(b)
	if !strings.HasPrefix(mt, "image/") {
		return core.Part{}, fmt.Errorf("%s is %s, not a recognised image: %w", path, describe(mt), ErrMediaType)
	}
	return core.Part{Kind: core.PartImage, MediaType: mt, Name: filepath.Base(path), Bytes: b}, nil
}

// FilePart reads a file into a canonical file part carried as bytes. Its
// media type comes from the file name's extension, else from its bytes;
// a name that contradicts the bytes (report.pdf holding a PNG) is refused
// with ErrMediaType.
func FilePart(path string) (core.Part, error) {
	b, err := readFile(path)
	if err != nil {
		return core.Part{}, err
	}
	mt := baseType(mime.TypeByExtension(filepath.Ext(path)))
	if mt == "" {
		mt = Sniff(b)
	}
	if err := CheckMediaType(core.PartFile, mt, b); err != nil {
		return core.Part{}, fmt.Errorf("%s: %w", path, err)
	}
	return core.Part{Kind: core.PartFile, MediaType: mt, Name: filepath.Base(path), Bytes: b}, nil
}
