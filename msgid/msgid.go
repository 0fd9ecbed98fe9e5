// Package msgid makes message ids: UUIDv7s (RFC 9562), time first, so that
// ids made one after another sort in the order they were made. The hub and
// the Go client both use it; it depends on nothing but the standard
// library.
package msgid

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// New returns a new message id: 32 hex digits of a UUIDv7, the Unix time
// in milliseconds followed by 74 random bits. Ids that grow with time go in
// at the end of a store's message-id index, so a commit of many new
// messages writes a page or two of it instead of a page each.
func New() string { return At(time.Now()) }

// At returns a new UUIDv7 message id for time t.
func At(t time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return hex.EncodeToString(b[:])
}
