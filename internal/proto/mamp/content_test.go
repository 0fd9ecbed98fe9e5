package mamp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/proto/atp"
)

func testImage() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	return img
}

func pngBytes(t testing.TB) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, testImage()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifBytes(t testing.TB) []byte {
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var pdfBytes = []byte("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestParseContentValid(t *testing.T) {
	pngB := pngBytes(t)
	tests := []struct {
		name    string
		content string
		want    []core.Part
	}{
		{"string shorthand", `"hello"`, []core.Part{{Kind: core.PartText, Text: "hello"}}},
		{"text part", `[{"type":"text","text":"hi"}]`, []core.Part{{Kind: core.PartText, Text: "hi"}}},
		{"image url", `[{"type":"image","source":{"type":"url","url":"https://example.com/a.png","media_type":"image/png"}}]`,
			[]core.Part{{Kind: core.PartImage, URL: "https://example.com/a.png", MediaType: "image/png"}}},
		{"image url without type", `[{"type":"image","source":{"type":"url","url":"http://example.com/a"}}]`,
			[]core.Part{{Kind: core.PartImage, URL: "http://example.com/a"}}},
		{"image base64", `[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64(pngB) + `"}}]`,
			[]core.Part{{Kind: core.PartImage, MediaType: "image/png", Bytes: pngB}}},
		{"code", `[{"type":"code","language":"python","code":"def hello(): pass"}]`,
			[]core.Part{{Kind: core.PartCode, Language: "python", Text: "def hello(): pass"}}},
		{"file url", `[{"type":"file","name":"report.pdf","mime_type":"application/pdf","source":{"type":"url","url":"https://x.test/r.pdf"}}]`,
			[]core.Part{{Kind: core.PartFile, Name: "report.pdf", MediaType: "application/pdf", URL: "https://x.test/r.pdf"}}},
		{"file base64", `[{"type":"file","name":"r.pdf","mime_type":"application/pdf","source":{"type":"base64","data":"` + b64(pdfBytes) + `"}}]`,
			[]core.Part{{Kind: core.PartFile, Name: "r.pdf", MediaType: "application/pdf", Bytes: pdfBytes}}},
		{"file media type in source", `[{"type":"file","source":{"type":"base64","media_type":"text/plain","data":"aGVsbG8="}}]`,
			[]core.Part{{Kind: core.PartFile, MediaType: "text/plain", Bytes: []byte("hello")}}},
		{"data extension", `[{"type":"data","data":{"a":[1,2]}}]`, []core.Part{{Kind: core.PartData, Data: json.RawMessage(`{"a":[1,2]}`)}}},
		{"extra fields kept in meta", `[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]`,
			[]core.Part{{Kind: core.PartText, Text: "x", Meta: map[string]any{"cache_control": map[string]any{"type": "ephemeral"}}}}},
		{"several parts", `[{"type":"text","text":"look"},{"type":"code","code":"x=1"}]`,
			[]core.Part{{Kind: core.PartText, Text: "look"}, {Kind: core.PartCode, Text: "x=1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseContent(json.RawMessage(tt.content))
			if err != nil {
				t.Fatalf("ParseContent: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseContentInvalid(t *testing.T) {
	pngB := pngBytes(t)
	tests := []struct {
		name    string
		content string
		want    error
	}{
		{"missing", ``, ErrContent},
		{"null", `null`, ErrContent},
		{"number", `42`, ErrContent},
		{"object", `{"type":"text","text":"x"}`, ErrContent},
		{"empty array", `[]`, ErrContent},
		{"part not object", `["hi"]`, ErrContent},
		{"no type", `[{"text":"x"}]`, ErrContent},
		{"unknown type", `[{"type":"audio","source":{}}]`, ErrPartType},
		{"text without text", `[{"type":"text"}]`, ErrContent},
		{"text not string", `[{"type":"text","text":5}]`, ErrContent},
		{"code without code", `[{"type":"code","language":"go"}]`, ErrContent},
		{"image without source", `[{"type":"image"}]`, ErrContent},
		{"source bad type", `[{"type":"image","source":{"type":"ftp","url":"x"}}]`, ErrContent},
		{"source unknown field", `[{"type":"image","source":{"type":"url","url":"https://a.b/c","size":3}}]`, ErrContent},
		{"relative url", `[{"type":"image","source":{"type":"url","url":"/a.png"}}]`, ErrContent},
		{"javascript url", `[{"type":"file","source":{"type":"url","url":"javascript:alert(1)"}}]`, ErrContent},
		{"invalid base64", `[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!not base64"}}]`, ErrBase64},
		{"base64 bad padding", `[{"type":"file","source":{"type":"base64","data":"aGVsbG8"}}]`, ErrBase64},
		{"base64 image without media type", `[{"type":"image","source":{"type":"base64","data":"` + b64(pngB) + `"}}]`, ErrContent},
		{"png declared jpeg", `[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"` + b64(pngB) + `"}}]`, ErrMediaType},
		{"text declared png", `[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8gd29ybGQ="}}]`, ErrMediaType},
		{"image declared pdf", `[{"type":"image","source":{"type":"base64","media_type":"application/pdf","data":"` + b64(pdfBytes) + `"}}]`, ErrMediaType},
		{"image url declared text", `[{"type":"image","source":{"type":"url","url":"https://a.b/c","media_type":"text/plain"}}]`, ErrMediaType},
		{"file pdf holding png", `[{"type":"file","mime_type":"application/pdf","source":{"type":"base64","data":"` + b64(pngB) + `"}}]`, ErrMediaType},
		{"file text holding png", `[{"type":"file","mime_type":"text/plain","source":{"type":"base64","data":"` + b64(pngB) + `"}}]`, ErrMediaType},
		{"file types disagree", `[{"type":"file","mime_type":"text/plain","source":{"type":"base64","media_type":"text/csv","data":"aGk="}}]`, ErrContent},
		{"malformed media type", `[{"type":"file","mime_type":"not a type","source":{"type":"url","url":"https://a.b/c"}}]`, ErrContent},
		{"empty data", `[{"type":"file","source":{"type":"base64","data":""}}]`, ErrContent},
		{"url with data", `[{"type":"file","source":{"type":"url","url":"https://a.b/c","data":"aGk="}}]`, ErrContent},
		{"data without data", `[{"type":"data"}]`, ErrContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseContent(json.RawMessage(tt.content))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCheckMediaType(t *testing.T) {
	tests := []struct {
		kind     core.PartKind
		declared string
		data     []byte
		ok       bool
	}{
		{core.PartImage, "image/png", pngBytes(t), true},
		{core.PartImage, "image/jpeg", jpegBytes(t), true},
		{core.PartImage, "image/jpg", jpegBytes(t), true},
		{core.PartImage, "image/gif", gifBytes(t), true},
		{core.PartImage, "image/png; charset=x", pngBytes(t), true},
		{core.PartImage, "IMAGE/PNG", pngBytes(t), true},
		{core.PartImage, "image/svg+xml", []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>`), true},
		{core.PartImage, "image/tiff", []byte("II*\x00\x08\x00\x00\x00"), true},
		{core.PartImage, "image/x-exotic", []byte{0x00, 0x01, 0xfe, 0x80, 0x99}, true},
		{core.PartImage, "image/x-exotic", pngBytes(t), false},
		{core.PartImage, "image/gif", pngBytes(t), false},
		{core.PartImage, "image/png", jpegBytes(t), false},
		{core.PartImage, "image/svg+xml", []byte("just text"), false},
		{core.PartImage, "text/plain", []byte("hi"), false},
		{core.PartFile, "text/plain", []byte("hi"), true},
		{core.PartFile, "application/octet-stream", []byte{1, 2, 3}, true},
		{core.PartFile, "application/pdf", pdfBytes, true},
		{core.PartFile, "application/pdf", []byte("hi"), false},
		{core.PartFile, "image/png", pngBytes(t), true},
		{core.PartFile, "image/png", pdfBytes, false},
		{core.PartFile, "application/zip", pngBytes(t), false},
		{core.PartFile, "", pngBytes(t), true},
	}
	for _, tt := range tests {
		err := CheckMediaType(tt.kind, tt.declared, tt.data)
		if (err == nil) != tt.ok {
			t.Errorf("CheckMediaType(%s, %q, %q…) = %v, want ok=%v", tt.kind, tt.declared, tt.data[:min(8, len(tt.data))], err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrMediaType) {
			t.Errorf("CheckMediaType(%s, %q) = %v, want ErrMediaType", tt.kind, tt.declared, err)
		}
	}
}

// samples are canonical parts of every kind, as MAMP carries them.
func samples(t testing.TB) map[string][]core.Part {
	return map[string][]core.Part{
		"text":         {{Kind: core.PartText, Text: "héllo <world> & \"you\""}},
		"text+meta":    {{Kind: core.PartText, Text: "x", Meta: map[string]any{"cache_control": map[string]any{"type": "ephemeral"}}}},
		"image url":    {{Kind: core.PartImage, URL: "https://example.com/cat.png", MediaType: "image/png", Name: "cat.png"}},
		"image bytes":  {{Kind: core.PartImage, MediaType: "image/png", Bytes: pngBytes(t)}},
		"code":         {{Kind: core.PartCode, Language: "go", Text: "package main\n\nfunc main() {}\n"}},
		"code no lang": {{Kind: core.PartCode, Text: "SELECT 1"}},
		"file url":     {{Kind: core.PartFile, Name: "report.pdf", MediaType: "application/pdf", URL: "https://x.test/r.pdf"}},
		"file bytes":   {{Kind: core.PartFile, Name: "notes.txt", MediaType: "text/plain", Bytes: []byte("line 1\nline 2\n")}},
		"data object":  {{Kind: core.PartData, Data: json.RawMessage(`{"k":"v","n":[1,2,3]}`)}},
		"data array":   {{Kind: core.PartData, Data: json.RawMessage(`[true,null]`)}},
		"mixed": {
			{Kind: core.PartText, Text: "see attached"},
			{Kind: core.PartImage, MediaType: "image/jpeg", Bytes: jpegBytes(t)},
			{Kind: core.PartCode, Language: "python", Text: "print(1)"},
			{Kind: core.PartFile, Name: "a.pdf", MediaType: "application/pdf", Bytes: pdfBytes},
		},
	}
}

// TestRoundTripCanonical checks canonical → MAMP → canonical for every
// part kind.
func TestRoundTripCanonical(t *testing.T) {
	for name, parts := range samples(t) {
		t.Run(name, func(t *testing.T) {
			enc, err := EncodeContent(parts)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseContent(enc)
			if err != nil {
				t.Fatalf("ParseContent(%s): %v", enc, err)
			}
			if !reflect.DeepEqual(normalise(t, back), normalise(t, parts)) {
				t.Fatalf("round trip changed the parts:\n got %+v\nwant %+v", back, parts)
			}
		})
	}
}

// TestRoundTripMAMP checks that MAMP → canonical → MAMP gives the same
// content, once normalised (the string shorthand becomes one text part, a
// file's source.media_type becomes its mime_type).
func TestRoundTripMAMP(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, `[{"type":"text","text":"plain"}]`},
		{`[{"type":"text","text":"a","x-extra":{"n":12345678901234567890}}]`, `[{"type":"text","text":"a","x-extra":{"n":12345678901234567890}}]`},
		{`[{"type":"image","source":{"type":"url","url":"https://e.test/i.png","media_type":"image/png"}}]`, ``},
		{`[{"type":"code","language":"python","code":"def hello(): pass"}]`, ``},
		{`[{"type":"file","name":"report.pdf","mime_type":"application/pdf","source":{"type":"url","url":"https://e.test/r.pdf"}}]`, ``},
		{`[{"type":"file","name":"t.txt","source":{"type":"base64","media_type":"text/plain","data":"aGk="}}]`,
			`[{"type":"file","name":"t.txt","mime_type":"text/plain","source":{"type":"base64","data":"aGk="}}]`},
		{`[{"type":"data","data":{"z":1,"a":[null]}}]`, ``},
	}
	for _, tt := range tests {
		parts, err := ParseContent(json.RawMessage(tt.in))
		if err != nil {
			t.Fatalf("ParseContent(%s): %v", tt.in, err)
		}
		out, err := EncodeContent(parts)
		if err != nil {
			t.Fatal(err)
		}
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if !jsonEqual(t, out, []byte(want)) {
			t.Errorf("MAMP round trip of %s\n got %s\nwant %s", tt.in, out, want)
		}
		// The normalised form is a fixed point.
		again, _ := ParseContent(out)
		out2, _ := EncodeContent(again)
		if !bytes.Equal(out, out2) {
			t.Errorf("normalised form is not stable: %s then %s", out, out2)
		}
	}
}

// TestRoundTripATP checks MAMP → canonical → ATP → canonical → MAMP for
// every part type, through the ATP adapter's own translation.
func TestRoundTripATP(t *testing.T) {
	for name, parts := range samples(t) {
		t.Run(name, func(t *testing.T) {
			mampIn, err := EncodeContent(parts)
			if err != nil {
				t.Fatal(err)
			}
			canon, err := ParseContent(mampIn)
			if err != nil {
				t.Fatal(err)
			}
			payload, err := atp.PartsToPayload(canon)
			if err != nil {
				t.Fatal(err)
			}
			// Over the wire: the payload is JSON.
			wire, _ := json.Marshal(json.RawMessage(payload))
			fromATP, err := atp.PayloadToParts(wire)
			if err != nil {
				t.Fatalf("PayloadToParts(%s): %v", wire, err)
			}
			mampOut, err := EncodeContent(fromATP)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, mampIn, mampOut) {
				t.Fatalf("MAMP → ATP → MAMP changed the content:\n in %s\nATP %s\nout %s", mampIn, payload, mampOut)
			}
			if !reflect.DeepEqual(normalise(t, fromATP), normalise(t, canon)) {
				t.Fatalf("canonical parts differ after ATP:\n got %+v\nwant %+v", fromATP, canon)
			}
		})
	}
}

// normalise re-reads parts through JSON so that Meta values compare by
// value (json.Number vs float64) and Data by its compact form.
func normalise(t testing.TB, ps []core.Part) []map[string]any {
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for _, p := range out {
		if d, ok := p["data"].(string); ok {
			var buf bytes.Buffer
			_ = json.Compact(&buf, []byte(d))
			p["data"] = buf.String()
		}
	}
	return out
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestEncodeContentRefusesEmptySource(t *testing.T) {
	for _, p := range []core.Part{{Kind: core.PartImage, MediaType: "image/png"}, {Kind: core.PartFile}, {Kind: "video"}} {
		if _, err := EncodeContent([]core.Part{p}); err == nil {
			t.Errorf("EncodeContent(%+v) succeeded", p)
		}
	}
}

func TestImageAndFilePart(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pngB := pngBytes(t)
	img, err := ImagePart(write("shot.png", pngB))
	if err != nil {
		t.Fatal(err)
	}
	if img.Kind != core.PartImage || img.MediaType != "image/png" || img.Name != "shot.png" || !bytes.Equal(img.Bytes, pngB) {
		t.Fatalf("ImagePart = %+v", img)
	}
	// A JPEG named .png is still recognised as what it is.
	img, err = ImagePart(write("lies.png", jpegBytes(t)))
	if err != nil || img.MediaType != "image/jpeg" {
		t.Fatalf("ImagePart(jpeg named png) = %v, %v", img.MediaType, err)
	}
	if _, err := ImagePart(write("notes.txt", []byte("not an image"))); !errors.Is(err, ErrMediaType) {
		t.Fatalf("ImagePart(text) err = %v, want ErrMediaType", err)
	}
	if _, err := ImagePart(write("empty.png", nil)); !errors.Is(err, ErrContent) {
		t.Fatalf("ImagePart(empty) err = %v, want ErrContent", err)
	}
	if _, err := ImagePart(filepath.Join(dir, "missing.png")); err == nil {
		t.Fatal("ImagePart(missing) succeeded")
	}
	f, err := FilePart(write("report.pdf", pdfBytes))
	if err != nil || f.MediaType != "application/pdf" || f.Name != "report.pdf" {
		t.Fatalf("FilePart(pdf) = %+v, %v", f, err)
	}
	f, err = FilePart(write("data.csv", []byte("a,b\n1,2\n")))
	if err != nil || !strings.HasPrefix(f.MediaType, "text/csv") {
		t.Fatalf("FilePart(csv) = %+v, %v", f.MediaType, err)
	}
	f, err = FilePart(write("blob", []byte{0, 1, 2, 3}))
	if err != nil || f.MediaType != "application/octet-stream" {
		t.Fatalf("FilePart(no extension) = %q, %v", f.MediaType, err)
	}
	if _, err := FilePart(write("fake.pdf", pngB)); !errors.Is(err, ErrMediaType) {
		t.Fatalf("FilePart(png named pdf) err = %v, want ErrMediaType", err)
	}
	// What the helpers build is valid MAMP content.
	enc, err := EncodeContent([]core.Part{TextPart("see"), img, f, CodePart("sh", "ls")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseContent(enc); err != nil {
		t.Fatalf("helpers built invalid content: %v", err)
	}
}
