package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// SQLite's write-ahead log (https://sqlite.org/fileformat2.html#walformat):
// a 32-byte header, then frames of a 24-byte header and one page. Each
// frame carries the header's salts and a checksum that runs on from the
// previous frame's. On open, SQLite replays frames up to the last commit
// frame before the first frame whose salts or checksum do not match, and
// silently ignores the rest: a damaged frame in the middle of a WAL drops
// every transaction after it without a word. checkWAL looks for that
// before SQLite opens the file.

const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
	walMagicLE         = 0x377f0682
	walMagicBE         = 0x377f0683
)

// walScan is what checkWAL found in a WAL file.
type walScan struct {
	size      int64
	pageSize  int
	frames    int // whole frames in the file
	valid     int // frames SQLite will read (the valid prefix)
	committed int // frames up to the last commit frame of the valid prefix
	salt      [2]uint32
	sums      [][2]uint32 // checksum of each valid frame
	// damage describes valid frames found after the valid prefix ended (or
	// after a damaged header): transactions SQLite would drop.
	damage string
}

// walChecksum runs SQLite's checksum over b (a multiple of 8 bytes) from s.
func walChecksum(s [2]uint32, b []byte, order binary.ByteOrder) [2]uint32 {
	for i := 0; i+8 <= len(b); i += 8 {
		s[0] += order.Uint32(b[i:]) + s[1]
		s[1] += order.Uint32(b[i+4:]) + s[0]
	}
	return s
}

// scanWAL reads the WAL at path. A missing or empty file is no WAL.
func scanWAL(path string) (*walScan, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	w := &walScan{size: st.Size()}
	if w.size == 0 {
		return w, nil
	}
	var hdr [walHeaderSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		// Shorter than a header: SQLite ignores it, and it can hold no
		// frame, so nothing is lost.
		return w, nil
	}
	magic := binary.BigEndian.Uint32(hdr[0:])
	order := binary.ByteOrder(binary.LittleEndian)
	if magic == walMagicBE {
		order = binary.BigEndian
	}
	w.pageSize = int(binary.BigEndian.Uint32(hdr[8:]))
	w.salt = [2]uint32{binary.BigEndian.Uint32(hdr[16:]), binary.BigEndian.Uint32(hdr[20:])}
	stored := [2]uint32{binary.BigEndian.Uint32(hdr[24:]), binary.BigEndian.Uint32(hdr[28:])}
	headerOK := (magic == walMagicLE || magic == walMagicBE) && binary.BigEndian.Uint32(hdr[4:]) == 3007000 &&
		w.pageSize >= 512 && w.pageSize <= 65536 && w.pageSize&(w.pageSize-1) == 0 &&
		walChecksum([2]uint32{}, hdr[:24], order) == stored
	if !headerOK {
		// SQLite ignores a WAL whose header is invalid. If frames that
		// verify against the header's salts and checksum follow, it held
		// transactions, and they would be lost.
		for _, ps := range []int{4096, 1024, 2048, 8192, 16384, 32768, 65536, 512} {
			for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				if n := countChained(f, w.size, ps, w.salt, stored, o, 0); n > 0 {
					w.damage = fmt.Sprintf("its header is damaged, and %d frames after it hold transactions SQLite would ignore", n)
					return w, nil
				}
			}
		}
		return w, nil
	}
	frameSize := int64(walFrameHeaderSize + w.pageSize)
	w.frames = int((w.size - walHeaderSize) / frameSize)
	buf := make([]byte, frameSize)
	sum := stored
	i := 0
	for ; i < w.frames; i++ {
		if _, err := f.ReadAt(buf, walHeaderSize+int64(i)*frameSize); err != nil {
			return nil, err
		}
		salt := [2]uint32{binary.BigEndian.Uint32(buf[8:]), binary.BigEndian.Uint32(buf[12:])}
		got := [2]uint32{binary.BigEndian.Uint32(buf[16:]), binary.BigEndian.Uint32(buf[20:])}
		want := walChecksum(walChecksum(sum, buf[:8], order), buf[walFrameHeaderSize:], order)
		if salt != w.salt || got != want {
			break
		}
		sum = got
		w.valid = i + 1
		w.sums = append(w.sums, got)
		if binary.BigEndian.Uint32(buf[4:]) != 0 { // a commit frame
			w.committed = i + 1
		}
	}
	if i >= w.frames {
		return w, nil
	}
	// The valid prefix ended at frame i. What follows is either left over
	// (a torn write of an unacknowledged transaction, or frames of an
	// earlier WAL generation, with other salts), or the rest of the log
	// after a damaged frame: frames with this WAL's salts whose checksum
	// verifies against the frame before them.
	if n := countChained(f, w.size, w.pageSize, w.salt, [2]uint32{}, order, i+1); n > 0 {
		w.damage = fmt.Sprintf("frame %d of %d is damaged, and %d frames after it hold transactions SQLite would drop", i+1, w.frames, n)
	}
	return w, nil
}

// countChained counts the frames from index `from` on whose salts match
// salt and whose checksum verifies when run on from the checksum stored in
// the frame before them (or seed, for frame 0 after a header).
func countChained(f *os.File, size int64, pageSize int, salt, seed [2]uint32, order binary.ByteOrder, from int) int {
	frameSize := int64(walFrameHeaderSize + pageSize)
	frames := int((size - walHeaderSize) / frameSize)
	buf := make([]byte, frameSize)
	prev := make([]byte, walFrameHeaderSize)
	n := 0
	for j := from; j < frames; j++ {
		sum := seed
		if j > 0 {
			if _, err := f.ReadAt(prev, walHeaderSize+int64(j-1)*frameSize); err != nil {
				return n
			}
			sum = [2]uint32{binary.BigEndian.Uint32(prev[16:]), binary.BigEndian.Uint32(prev[20:])}
		}
		if _, err := f.ReadAt(buf, walHeaderSize+int64(j)*frameSize); err != nil {
			return n
		}
		if [2]uint32{binary.BigEndian.Uint32(buf[8:]), binary.BigEndian.Uint32(buf[12:])} != salt {
			continue
		}
		want := walChecksum(walChecksum(sum, buf[:8], order), buf[walFrameHeaderSize:], order)
		if [2]uint32{binary.BigEndian.Uint32(buf[16:]), binary.BigEndian.Uint32(buf[20:])} == want {
			n++
		}
	}
	return n
}

// walIndex is the part of the WAL index (the -shm file) header that says
// how much of the WAL the last process to use it had committed.
type walIndex struct {
	mxFrame   uint32 // frames of the WAL holding committed transactions
	salt      [2]uint32
	frameSum  [2]uint32 // checksum of frame mxFrame
	nBackfill uint32    // frames already copied into the database
}

// readWALIndex reads the -shm file's header (native byte order; both
// copies must agree and be initialised), or nil when there is none or it
// cannot be trusted.
func readWALIndex(path string) *walIndex {
	b := make([]byte, 136)
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := io.ReadFull(f, b); err != nil {
		return nil
	}
	if string(b[:48]) != string(b[48:96]) {
		return nil // being written when the process died
	}
	o := binary.NativeEndian
	if o.Uint32(b[0:]) != 3007000 || b[12] != 1 {
		return nil
	}
	return &walIndex{
		mxFrame:   o.Uint32(b[16:]),
		frameSum:  [2]uint32{o.Uint32(b[24:]), o.Uint32(b[28:])},
		salt:      [2]uint32{binary.BigEndian.Uint32(b[32:]), binary.BigEndian.Uint32(b[36:])}, // the WAL header's bytes
		nBackfill: o.Uint32(b[96:]),
	}
}

// walLoss compares the WAL with what its index says was committed: the
// index (updated after each commit's frames were written and synced) names
// the last committed frame and its checksum. Frames it names that the WAL
// no longer holds, or holds otherwise, are lost transactions. An index of
// another WAL generation (other salts), one that says nothing is pending
// (everything copied into the database), or none, proves nothing.
func walLoss(w *walScan, idx *walIndex) string {
	if idx == nil || idx.mxFrame == 0 || idx.mxFrame <= idx.nBackfill {
		return ""
	}
	if w == nil || w.size == 0 {
		return fmt.Sprintf("it is missing, but its index (-shm) says it held %d frames of committed transactions not yet copied into the database", idx.mxFrame-idx.nBackfill)
	}
	if idx.salt != w.salt {
		return ""
	}
	switch {
	case w.committed < int(idx.mxFrame):
		return fmt.Sprintf("it holds %d valid committed frames, but its index (-shm) says %d were committed", w.committed, idx.mxFrame)
	case w.sums[idx.mxFrame-1] != idx.frameSum:
		return fmt.Sprintf("its frame %d differs from the one its index (-shm) says was committed", idx.mxFrame)
	}
	return ""
}
