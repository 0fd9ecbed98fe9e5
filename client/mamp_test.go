package client_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/proto/mamp"
)

// TestMAMPPartsParseOnTheHub: the parts the client builds (without
// importing the hub) are what the hub's MAMP adapter reads them as.
func TestMAMPPartsParseOnTheHub(t *testing.T) {
	dir := t.TempDir()
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	imgPath := filepath.Join(dir, "dot.png")
	txtPath := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(imgPath, png, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(txtPath, []byte("plain notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := client.MAMPImage(imgPath)
	if err != nil {
		t.Fatal(err)
	}
	file, err := client.MAMPFile(txtPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.MAMPImage(txtPath); err == nil {
		t.Error("MAMPImage took a text file")
	}
	raw, _ := json.Marshal([]client.MAMPPart{client.MAMPText("hi"), client.MAMPCode("go", "x := 1"), img, file})
	parts, err := mamp.ParseContent(raw)
	if err != nil {
		t.Fatalf("the hub refused the client's parts: %v", err)
	}
	want := []core.Part{
		{Kind: core.PartText, Text: "hi"},
		{Kind: core.PartCode, Language: "go", Text: "x := 1"},
		{Kind: core.PartImage, MediaType: "image/png", Name: "dot.png", Bytes: png},
		{Kind: core.PartFile, MediaType: "text/plain", Name: "notes.txt", Bytes: []byte("plain notes")},
	}
	if len(parts) != len(want) {
		t.Fatalf("parsed %d parts, want %d", len(parts), len(want))
	}
	for i := range want {
		g, w := parts[i], want[i]
		if g.Kind != w.Kind || g.Text != w.Text || g.Language != w.Language || g.MediaType != w.MediaType ||
			g.Name != w.Name || string(g.Bytes) != string(w.Bytes) {
			t.Errorf("part %d: got %+v, want %+v", i, g, w)
		}
	}
}
