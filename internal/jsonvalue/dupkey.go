package jsonvalue

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DuplicateKey finds an object in the JSON text data that names one key
// twice, and returns that key. Keys are compared after unescaping, so "a"
// and "\u0061" are the same key. In the top-level object keys are also
// compared under Unicode case folding: encoding/json fills a struct field
// from any key equal to its name that way, so "sender" and "Sender" there
// would silently stand for one field, the last one winning.
//
// Such a text is valid JSON, but RFC 8259 leaves its meaning open: parsers
// keep the first value, the last, or both, so a hub that took one reading
// while a proxy or the receiver took another could be made to act on a
// field that nobody checked. Callers decode data first; on text that is
// not valid JSON the answer is meaningless, but DuplicateKey does not
// panic and its time stays linear in len(data).
func DuplicateKey(data []byte) (string, bool) {
	// The usual body's keys and nesting fit in these arrays, which stay on
	// the stack (the scan appends to local slices only).
	var keyBuf [2 * smallObject]dupKey
	var frameBuf [8]dupFrame
	keys, frames := keyBuf[:0], frameBuf[:0] // the keys of the open objects; the open objects and arrays
	for i := 0; i < len(data); {
		switch data[i] {
		case '{':
			frames = append(frames, dupFrame{object: true, fold: len(frames) == 0, start: len(keys)})
			i++
		case '[':
			frames = append(frames, dupFrame{})
			i++
		case '}', ']':
			if n := len(frames); n > 0 {
				if f := frames[n-1]; f.object {
					keys = keys[:f.start]
				}
				frames = frames[:n-1]
			}
			i++
		case '"':
			var raw []byte
			raw, i = str(data, i)
			if n := len(frames); n > 0 && frames[n-1].object && nextIsColon(data, i) {
				var dup bool
				if keys, dup = addKey(keys, &frames[n-1], raw); dup {
					return unescape(raw), true
				}
			}
		default:
			i++
		}
	}
	return "", false
}

// smallObject is how many keys an object may have before its keys are
// compared through a map rather than one by one.
const smallObject = 16

type dupFrame struct {
	object bool
	fold   bool                // compare keys under case folding
	start  int                 // this object's first key in keys
	set    map[string]struct{} // its keys, once it has more than smallObject
}

// dupKey is a key as written (between the quotes) and, once a comparison
// has needed it, its canonical form: each key is unescaped and folded at
// most once, so the scan stays linear whatever the keys are like.
type dupKey struct {
	raw   []byte
	plain bool // raw stands for itself (see plain)
	canon string
	known bool // canon is set
}

func (k *dupKey) canonical(fold bool) string {
	if !k.known {
		k.canon, k.known = canonicalKey(k.raw, fold), true
	}
	return k.canon
}

// str returns the raw contents of the string whose opening quote is at
// data[i], and the index just past its closing quote.
func str(data []byte, i int) ([]byte, int) {
	start := i + 1
	for j := start; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return data[start:j], j + 1
		}
	}
	return data[start:], len(data)
}

// nextIsColon reports whether the next non-space byte from data[i] is a
// colon, which makes the string just read a key.
func nextIsColon(data []byte, i int) bool {
	for ; i < len(data); i++ {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// addKey records raw as a key of object f, whose keys end keys, reporting
// whether f has it already.
func addKey(keys []dupKey, f *dupFrame, raw []byte) ([]dupKey, bool) {
	k := dupKey{raw: raw, plain: plain(raw)}
	if f.set != nil {
		c := k.canonical(f.fold)
		if _, ok := f.set[c]; ok {
			return keys, true
		}
		f.set[c] = struct{}{}
		return keys, false
	}
	own := keys[f.start:]
	for i := range own {
		if sameKey(&own[i], &k, f.fold) {
			return keys, true
		}
	}
	keys = append(keys, k)
	if len(own)+1 > smallObject {
		f.set = make(map[string]struct{}, 2*smallObject)
		for i := f.start; i < len(keys); i++ {
			f.set[keys[i].canonical(f.fold)] = struct{}{}
		}
	}
	return keys, false
}

// sameKey compares two keys on their bytes when both stand for
// themselves, else on their canonical forms.
func sameKey(a, b *dupKey, fold bool) bool {
	if a.plain && b.plain {
		if fold {
			return bytes.EqualFold(a.raw, b.raw)
		}
		return bytes.Equal(a.raw, b.raw)
	}
	return a.canonical(fold) == b.canonical(fold)
}

// canonicalKey is raw unescaped and, with fold, with every rune replaced
// by the smallest rune that folds to it: two keys are equal under case
// folding exactly when their folded forms are equal.
func canonicalKey(raw []byte, fold bool) string {
	s := unescape(raw)
	if !fold {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// plain reports whether raw stands for itself: no escapes, and valid
// UTF-8 (encoding/json reads each invalid byte as U+FFFD).
func plain(raw []byte) bool {
	return bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw)
}

// unescape is the string the raw contents of a JSON string stand for, as
// encoding/json reads it.
func unescape(raw []byte) string {
	if plain(raw) {
		return string(raw)
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return string(raw)
	}
	return s
}
