package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlitedrv "modernc.org/sqlite"
)

// The store never starts empty by accident, nor on a damaged file. Before
// SQLite opens the database, Open looks at the files (inspect): the marker
// written when the database was created here (markerFile) tells a data
// directory that lost its database from a new one, the file's header and
// length tell a truncated or foreign file, and the write-ahead log is read
// frame by frame (wal.go) for damage that would make SQLite drop
// committed transactions without a word. After opening, SQLite's own
// check (PRAGMA quick_check, or integrity_check) reads every page. Any
// finding refuses the start with a *DamageError naming the file and the
// ways out: restore it from a backup, or start with Options.Recover.

// markerFile records that a database was created in the data directory;
// hiddenMarkerFile is its copy that a deletion of the directory's files by
// a shell pattern (rm data/*, which skips dot files) leaves behind.
const (
	markerFile       = "switchboard.created"
	hiddenMarkerFile = ".switchboard.created"
)

// dbFile is the database's file name in the data directory.
const dbFile = "switchboard.db"

// ErrDamaged is matched (errors.Is) by a *DamageError.
var ErrDamaged = errors.New("sqlite: store damaged or missing")

// DamageError says what is wrong with which file of the data directory,
// and how to go on.
type DamageError struct {
	Dir     string // the data directory
	File    string // the file at fault
	Problem string
}

func (e *DamageError) Error() string {
	db := filepath.Join(e.Dir, dbFile)
	return fmt.Sprintf("sqlite: %s: %s. The hub does not start on a missing or damaged store. "+
		"Restore %s from a backup (with its -wal file if the backup has one), "+
		"or start once with --recover salvage (copies what can still be read into a new database) "+
		"or --recover fresh (starts with an empty store); both keep the damaged files in %s",
		e.File, e.Problem, db, filepath.Join(e.Dir, "damaged-<time>"))
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Recovery modes (Options.Recover).
const (
	// RecoverFresh moves a damaged or orphaned store aside and starts with
	// an empty one.
	RecoverFresh = "fresh"
	// RecoverSalvage moves a damaged store aside and copies into a new
	// database every row that can still be read (the write-ahead log up to
	// its damage included).
	RecoverSalvage = "salvage"
)

// Integrity checks (Options.Check).
const (
	CheckQuick = "quick" // PRAGMA quick_check: every page and b-tree (default)
	CheckFull  = "full"  // PRAGMA integrity_check: also indexes against tables
	CheckOff   = "off"
)

type marker struct {
	CreatedAt time.Time `json:"created_at"`
	Database  string    `json:"database"`
}

// inspect looks at the data directory's files before SQLite opens them.
// It returns nil for a healthy store or a new directory.
func inspect(dir string) error {
	path := filepath.Join(dir, dbFile)
	damaged := func(file, format string, args ...any) error {
		return &DamageError{Dir: dir, File: file, Problem: fmt.Sprintf(format, args...)}
	}
	var mk *marker
	b, mkPath, _ := readMarkers(dir)
	if b != nil {
		mk = new(marker)
		if json.Unmarshal(b, mk) != nil {
			mk.CreatedAt = time.Time{}
		}
	}
	created := func() string {
		if mk == nil || mk.CreatedAt.IsZero() {
			return ""
		}
		return " on " + mk.CreatedAt.UTC().Format(time.RFC3339)
	}
	walPath, shmPath := path+"-wal", path+"-shm"
	wal, err := scanWAL(walPath)
	if err != nil {
		return fmt.Errorf("sqlite: read %s: %w", walPath, err)
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if mk != nil {
			return damaged(path, "the database is missing, but %s records that it was created here%s",
				mkPath, created())
		}
		if wal != nil && wal.size > 0 {
			return damaged(path, "the database is missing, but its write-ahead log %s (%d bytes) is there", walPath, wal.size)
		}
		return nil // a new data directory
	case err != nil:
		return fmt.Errorf("sqlite: %w", err)
	case !st.Mode().IsRegular():
		return damaged(path, "it is not a regular file")
	case st.Size() == 0:
		if mk != nil {
			return damaged(path, "the database is empty (0 bytes), but %s records that it was created here%s",
				mkPath, created())
		}
		if wal != nil && wal.size > 0 {
			return damaged(path, "the database is empty (0 bytes), but its write-ahead log %s holds %d bytes", walPath, wal.size)
		}
		return nil // created by a first start that ended before its schema was written
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	var hdr [100]byte
	_, err = io.ReadFull(f, hdr[:])
	f.Close()
	if err != nil || string(hdr[:16]) != "SQLite format 3\x00" {
		return damaged(path, "it is not an SQLite database (its header is damaged or the file is truncated, %d bytes)", st.Size())
	}
	pageSize := int64(binary.BigEndian.Uint16(hdr[16:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return damaged(path, "its header names a page size of %d bytes", pageSize)
	}
	if st.Size()%pageSize != 0 {
		return damaged(path, "it is truncated: %d bytes is not a whole number of %d-byte pages", st.Size(), pageSize)
	}
	// The page count in the header is valid when the "version valid for"
	// number matches the change counter.
	if binary.BigEndian.Uint32(hdr[92:]) == binary.BigEndian.Uint32(hdr[24:]) {
		if pages := int64(binary.BigEndian.Uint32(hdr[28:])); st.Size() < pages*pageSize {
			return damaged(path, "it is truncated: %d bytes, but its header says %d pages of %d bytes", st.Size(), pages, pageSize)
		}
	}
	if wal != nil && wal.damage != "" {
		return damaged(walPath, "the write-ahead log is damaged: %s", wal.damage)
	}
	if loss := walLoss(wal, readWALIndex(shmPath)); loss != "" {
		return damaged(walPath, "committed transactions of the write-ahead log are gone: %s", loss)
	}
	return nil
}

// corrupt reports whether err is SQLite's "database disk image is
// malformed" (SQLITE_CORRUPT) or "file is not a database" (SQLITE_NOTADB).
func corrupt(err error) bool {
	var se *sqlitedrv.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 11, 26:
			return true
		}
	}
	return false
}

// checkDB runs SQLite's check on an open database.
func checkDB(ctx context.Context, db *sql.DB, dir, mode string) error {
	q := "PRAGMA quick_check(20)"
	switch mode {
	case CheckOff:
		return nil
	case CheckFull:
		q = "PRAGMA integrity_check(20)"
	case "", CheckQuick:
	default:
		return fmt.Errorf("sqlite: check %q: want quick, full or off", mode)
	}
	path := filepath.Join(dir, dbFile)
	readAhead(path)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		if corrupt(err) {
			return &DamageError{Dir: dir, File: path, Problem: "SQLite cannot read it: " + err.Error()}
		}
		return fmt.Errorf("sqlite: check %s: %w", path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("sqlite: check %s: %w", path, err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		if corrupt(err) {
			return &DamageError{Dir: dir, File: path, Problem: "SQLite cannot read it: " + err.Error()}
		}
		return fmt.Errorf("sqlite: check %s: %w", path, err)
	}
	if len(problems) > 0 {
		return &DamageError{Dir: dir, File: path, Problem: "SQLite's check found damage: " + strings.Join(problems, "; ")}
	}
	return nil
}

// readAhead reads the database file once from start to end, so that the
// check that follows, which walks it page by page in b-tree order, finds it
// in the page cache: on this project's disk a cold 513 MiB database took
// 8.6 s to check page by page and 1.8 s read ahead first (BENCHMARKS.md).
func readAhead(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	for {
		if _, err := f.Read(buf); err != nil {
			return
		}
	}
}

// readMarkers returns the record of the first marker file there is (nil
// if none), its path, and the marker files that are missing.
func readMarkers(dir string) (rec []byte, path string, missing []string) {
	for _, name := range []string{markerFile, hiddenMarkerFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case err != nil:
			missing = append(missing, name)
		case rec == nil:
			rec, path = b, filepath.Join(dir, name)
		}
	}
	return rec, path, missing
}

// writeMarker records that the database was created here (once), in both
// marker files; a missing one gets the other's record, so the first
// start's time.
func writeMarker(dir string, now time.Time) error {
	rec, _, missing := readMarkers(dir)
	if len(missing) == 0 {
		return nil
	}
	if rec == nil {
		rec, _ = json.Marshal(marker{CreatedAt: now.UTC(), Database: dbFile})
	}
	for _, name := range missing {
		path := filepath.Join(dir, name)
		if err := writeFileSynced(path, append(bytes.TrimSpace(rec), '\n')); err != nil {
			return fmt.Errorf("sqlite: write %s: %w", path, err)
		}
	}
	return syncDir(dir)
}

// writeFileSynced writes b to path through a synced temporary file.
func writeFileSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// moveAside moves the store's files (database, WAL, index, markers) into a
// new directory damaged-<time> of dir and returns it.
func moveAside(dir string, now time.Time) (string, error) {
	aside := filepath.Join(dir, "damaged-"+now.UTC().Format("20060102T150405.000Z"))
	if err := os.Mkdir(aside, 0o700); err != nil {
		return "", fmt.Errorf("sqlite: recover: %w", err)
	}
	for _, name := range []string{dbFile, dbFile + "-wal", dbFile + "-shm", markerFile, hiddenMarkerFile} {
		err := os.Rename(filepath.Join(dir, name), filepath.Join(aside, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("sqlite: recover: move %s aside: %w", name, err)
		}
	}
	return aside, syncDir(dir)
}
