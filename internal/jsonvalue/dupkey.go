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
	// Room for the usual body on the stack: no allocation unless an
	// object nests deeper or has more keys.
	var keys [2 * smallObject][]byte
	var frames [8]dupFrame
	d := dupScanner{data: data, keys: keys[:0], frames: frames[:0]}
	return d.scan()
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

type dupScanner struct {
	data   []byte
	i      int
	keys   [][]byte // the raw keys (between the quotes) of the open objects
	frames []dupFrame
}

func (d *dupScanner) scan() (string, bool) {
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch c {
		case '{':
			d.frames = append(d.frames, dupFrame{object: true, fold: len(d.frames) == 0, start: len(d.keys)})
			d.i++
		case '[':
			d.frames = append(d.frames, dupFrame{})
			d.i++
		case '}', ']':
			if n := len(d.frames); n > 0 {
				if f := d.frames[n-1]; f.object {
					d.keys = d.keys[:f.start]
				}
				d.frames = d.frames[:n-1]
			}
			d.i++
		case '"':
			raw := d.str()
			if n := len(d.frames); n > 0 && d.frames[n-1].object && d.nextIsColon() {
				if key, dup := d.add(&d.frames[n-1], raw); dup {
					return key, true
				}
			}
		default:
			d.i++
		}
	}
	return "", false
}

// str skips the string starting at d.i and returns its raw contents.
func (d *dupScanner) str() []byte {
	start := d.i + 1
	for j := start; j < len(d.data); j++ {
		switch d.data[j] {
		case '\\':
			j++
		case '"':
			d.i = j + 1
			return d.data[start:j]
		}
	}
	d.i = len(d.data)
	return d.data[start:]
}

// nextIsColon reports whether the next non-space byte is a colon, which
// makes the string just read a key.
func (d *dupScanner) nextIsColon() bool {
	for j := d.i; j < len(d.data); j++ {
		switch d.data[j] {
		case ' ', '\t', '\r', '\n':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// add records raw as a key of object f, reporting whether f has it already.
func (d *dupScanner) add(f *dupFrame, raw []byte) (string, bool) {
	if f.set != nil {
		k := canonicalKey(raw, f.fold)
		if _, ok := f.set[k]; ok {
			return unescape(raw), true
		}
		f.set[k] = struct{}{}
		return "", false
	}
	keys := d.keys[f.start:]
	for _, k := range keys {
		if sameKey(k, raw, f.fold) {
			return unescape(raw), true
		}
	}
	d.keys = append(d.keys, raw)
	if len(keys)+1 > smallObject {
		f.set = make(map[string]struct{}, 2*smallObject)
		for _, k := range d.keys[f.start:] {
			f.set[canonicalKey(k, f.fold)] = struct{}{}
		}
	}
	return "", false
}

func sameKey(a, b []byte, fold bool) bool {
	if !plain(a) || !plain(b) {
		return canonicalKey(a, fold) == canonicalKey(b, fold)
	}
	if fold {
		return bytes.EqualFold(a, b)
	}
	return bytes.Equal(a, b)
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
