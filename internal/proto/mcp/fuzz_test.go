package mcp_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	mcpadapter "github.com/switchboard-hub/switchboard/internal/proto/mcp"
)

// FuzzParseURI checks that ParseURI never panics, fails only with
// ErrBadURI, and that parsed agent and conversation URIs round-trip.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"switchboard://agents", "switchboard://agents/w-1", "switchboard://conversations/a%20b", "switchboard://agents/%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		kind, id, err := mcpadapter.ParseURI(uri)
		if err != nil {
			if !errors.Is(err, mcpadapter.ErrBadURI) {
				t.Fatalf("error %v is not ErrBadURI", err)
			}
			return
		}
		var again string
		switch kind {
		case mcpadapter.ResourceAgent:
			again = mcpadapter.AgentURI(id)
		case mcpadapter.ResourceConversation:
			again = mcpadapter.ConversationURI(id)
		default:
			return
		}
		k2, id2, err := mcpadapter.ParseURI(again)
		if err != nil || k2 != kind || id2 != id {
			t.Fatalf("%q → %v %q → %q → %v %q %v", uri, kind, id, again, k2, id2, err)
		}
	})
}

// FuzzToParts decodes send_message's text and parts as a host would send
// them and checks that ToParts never panics, fails only with ErrBadPart,
// and that accepted parts survive FromParts → ToParts unchanged.
func FuzzToParts(f *testing.F) {
	f.Add("hi", `[]`)
	f.Add("", `[{"kind":"image","bytes_base64":"aGk=","media_type":"image/png"}]`)
	f.Add("", `[{"kind":"data","data":{"a":[1,2]}},{"kind":"code","text":"x := 1","language":"go"}]`)
	f.Add("", `[{"kind":"file","url":"https://x/y.pdf"}]`)
	f.Fuzz(func(t *testing.T, text, parts string) {
		var in []mcpadapter.Part
		if json.Unmarshal([]byte(parts), &in) != nil {
			return
		}
		cp, err := mcpadapter.ToParts(text, in)
		if err != nil {
			if !errors.Is(err, mcpadapter.ErrBadPart) {
				t.Fatalf("error %v is not ErrBadPart", err)
			}
			return
		}
		back := mcpadapter.FromParts(cp)
		cp2, err := mcpadapter.ToParts("", back)
		if err != nil {
			t.Fatalf("round trip of %s: %v", parts, err)
		}
		a, _ := json.Marshal(cp)
		b, _ := json.Marshal(cp2)
		var x, y any
		_ = json.Unmarshal(a, &x)
		_ = json.Unmarshal(b, &y)
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("round trip changed parts:\n%s\n%s", a, b)
		}
	})
}
