package amp

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLoadPhrases(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	replace, err := LoadPhrases(write("replace.json", `{"giving_up":["abandon ship"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(replace.GivingUp, []string{"abandon ship"}) {
		t.Fatalf("replace: %v", replace.GivingUp)
	}
	if !slices.Equal(replace.Frustration, DefaultPhrases().Frustration) {
		t.Fatal("an absent list must keep the default")
	}
	extend, err := LoadPhrases(write("extend.json", `{"extend":true,"giving_up":["abandon ship"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(extend.GivingUp) != len(DefaultPhrases().GivingUp)+1 || !slices.Contains(extend.GivingUp, "give up") {
		t.Fatalf("extend: %v", extend.GivingUp)
	}
	if _, err := LoadPhrases(write("bad.json", `{`)); err == nil {
		t.Fatal("bad JSON accepted")
	}
	if _, err := LoadPhrases(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}

	h := newHarness(t, WithPhrases(replace))
	if r := h.step(TickInput{Event: HostUserPromptSubmit, Message: "Time to ABANDON SHIP."}); !slices.Equal(r.Envelope.Events, []Event{EventGivingUp}) {
		t.Fatalf("custom phrase not detected: %+v", r.Envelope)
	}
	h.clock.Advance(TriggerCooldown)
	if r := h.step(TickInput{Event: HostUserPromptSubmit, Message: "I give up"}); len(r.Envelope.Events) != 0 {
		t.Fatalf("replaced phrase still detected: %+v", r.Envelope)
	}
}

func TestDetectRoles(t *testing.T) {
	m := newMatcher(DefaultPhrases())
	// User text is not checked for claims; agent text is not checked for frustration.
	if d := m.detect("all tests passed?", true, false); d.Claim != "" {
		t.Fatalf("claim in user text: %+v", d)
	}
	if d := m.detect("still not working", false, true); d.Frustration != "" {
		t.Fatalf("frustration in agent text: %+v", d)
	}
	if d := m.detect("", true, true); d.Any() {
		t.Fatal("empty text detected something")
	}
}
