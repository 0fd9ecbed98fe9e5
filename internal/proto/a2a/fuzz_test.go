package a2a

import (
	"encoding/json"
	"testing"
)

func FuzzParseBody(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"t"}},{"jsonrpc":"2.0","method":"x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, errs, _, perr := ParseBody(b)
		if perr != nil {
			return
		}
		if len(reqs) == 0 || len(reqs) != len(errs) {
			t.Fatalf("%d requests, %d errors", len(reqs), len(errs))
		}
		for i, r := range reqs {
			if errs[i] == nil && (r.Method == "" || (len(r.Params) > 0 && r.Params[0] != '{')) {
				t.Fatalf("accepted invalid request %+v", r)
			}
		}
	})
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"},{"kind":"file","file":{"bytes":"AAE=","mimeType":"image/png"}},{"kind":"data","data":{"a":1}}]}`), false)
	f.Add([]byte(`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"},{"raw":"AAE="},{"url":"http://x/y"},{"data":[1]}]}`), true)
	f.Fuzz(func(t *testing.T, b []byte, v1 bool) {
		v := V03
		if v1 {
			v = V10
		}
		m, err := DecodeMessage(v, b)
		if err != nil {
			return
		}
		parts, err := PartsToCore(m.Parts)
		if err != nil {
			return
		}
		// Whatever decodes and maps must encode again.
		if _, err := json.Marshal(EncodeMessage(v, m)); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		_ = PartsFromCore(parts)
	})
}
