package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// salvage copies into a new database at to, with the current schema, every
// row of the damaged database at from that SQLite can still read (from
// opens with its write-ahead log, which SQLite replays up to its first
// damaged frame). Each table is read in key order until a read fails,
// then backwards from its end until one fails, so only the rows on
// damaged pages are lost. Derived data is then rebuilt from what was
// saved: each lane's queued count from its messages, and the capability
// index from the agents. It returns a report, one line per table.
func salvage(ctx context.Context, from, to string) (string, error) {
	src, err := sql.Open("sqlite", "file:"+from+"?_pragma=busy_timeout(1000)")
	if err != nil {
		return "", err
	}
	defer src.Close()
	src.SetMaxOpenConns(1)
	dst, err := sql.Open("sqlite", "file:"+to+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return "", err
	}
	defer dst.Close()
	dst.SetMaxOpenConns(1)
	if _, err := dst.ExecContext(ctx, schema); err != nil {
		return "", fmt.Errorf("create schema: %w", err)
	}
	tables, err := names(ctx, dst, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
	if err != nil {
		return "", err
	}
	var report []string
	for _, t := range tables {
		line, err := salvageTable(ctx, src, dst, t)
		if err != nil {
			return "", err
		}
		report = append(report, line)
	}
	if err := rebuildDerived(ctx, dst); err != nil {
		return "", err
	}
	if _, err := dst.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return "", err
	}
	return strings.Join(report, "\n"), nil
}

func names(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// columns lists a table's columns and its primary key's, in key order
// (none for a rowid table).
func columns(ctx context.Context, db *sql.DB, table string) (cols, pk []string, err error) {
	rows, err := db.QueryContext(ctx, "SELECT name, pk FROM pragma_table_info(?) ORDER BY pk", table)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var k int
		if err := rows.Scan(&name, &k); err != nil {
			return nil, nil, err
		}
		cols = append(cols, name)
		if k > 0 {
			pk = append(pk, name)
		}
	}
	return cols, pk, rows.Err()
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// salvageTable copies what can be read of one table.
func salvageTable(ctx context.Context, src, dst *sql.DB, table string) (string, error) {
	want, _, err := columns(ctx, dst, table)
	if err != nil {
		return "", err
	}
	have, pk, err := columns(ctx, src, table)
	if err != nil || len(have) == 0 {
		return fmt.Sprintf("%s: not readable in the damaged database (%v)", table, err), nil
	}
	var cols []string
	for _, c := range want {
		for _, h := range have {
			if c == h {
				cols = append(cols, quote(c))
			}
		}
	}
	var withoutRowid bool
	if err := src.QueryRowContext(ctx, "SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_schema WHERE name = ?", table).Scan(&withoutRowid); err != nil {
		withoutRowid = len(pk) > 0
	}
	order := "rowid"
	if withoutRowid {
		q := make([]string, len(pk))
		for i, k := range pk {
			q[i] = quote(k)
		}
		order = strings.Join(q, ", ")
	}
	list := strings.Join(cols, ", ")
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
	insert := "INSERT OR IGNORE INTO " + quote(table) + " (" + list + ") VALUES (" + marks + ")"
	var total int
	var failed []string
	for _, dir := range []string{"", " DESC"} {
		var descOrder string
		if dir != "" {
			parts := strings.Split(order, ", ")
			for i := range parts {
				parts[i] += dir
			}
			descOrder = strings.Join(parts, ", ")
		} else {
			descOrder = order
		}
		n, err := copyRows(ctx, src, dst, "SELECT "+list+" FROM "+quote(table)+" ORDER BY "+descOrder, insert, len(cols))
		total += n
		if err == nil {
			break // read to the end: nothing left to try from the other side
		}
		failed = append(failed, err.Error())
	}
	var kept int
	_ = dst.QueryRowContext(ctx, "SELECT count(*) FROM "+quote(table)).Scan(&kept)
	if len(failed) == 0 {
		return fmt.Sprintf("%s: %d rows, all read", table, kept), nil
	}
	return fmt.Sprintf("%s: %d rows saved; reads stopped at damage (%s)", table, kept, strings.Join(failed, "; ")), nil
}

// copyRows inserts the rows of query into dst until the end or the first
// read error, which it returns.
func copyRows(ctx context.Context, src, dst *sql.DB, query, insert string, ncols int) (int, error) {
	tx, err := dst.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, insert)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n := 0
	rows, err := src.QueryContext(ctx, query)
	var readErr error
	if err != nil {
		readErr = err
	} else {
		vals := make([]any, ncols)
		ptrs := make([]any, ncols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				readErr = err
				break
			}
			if _, err := st.ExecContext(ctx, vals...); err != nil {
				rows.Close()
				return n, fmt.Errorf("write: %w", err)
			}
			n++
		}
		if readErr == nil {
			readErr = rows.Err()
		}
		rows.Close()
	}
	if err := tx.Commit(); err != nil {
		return n, err
	}
	return n, readErr
}

// rebuildDerived recomputes what other tables derive from the messages
// and agents that were saved.
func rebuildDerived(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{
		`INSERT OR IGNORE INTO lanes(receiver, sender, pending, next_at) SELECT receiver, sender, 0, 0 FROM messages WHERE state = 0 GROUP BY receiver, sender`,
		`UPDATE lanes SET claim_until = 0, owner = '', parked = 0,
			pending = (SELECT count(*) FROM messages m WHERE m.state = 0 AND m.receiver = lanes.receiver AND m.sender = lanes.sender)`,
		`DELETE FROM agent_caps`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT data FROM agents")
	if err != nil {
		return err
	}
	var agents []*core.Agent
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return err
		}
		a := new(core.Agent)
		if json.Unmarshal(b, a) == nil {
			agents = append(agents, a)
		}
	}
	rows.Close()
	for _, a := range agents {
		for _, c := range capabilitySet(a) {
			if _, err := db.ExecContext(ctx, "INSERT OR IGNORE INTO agent_caps(capability, agent_id) VALUES (?,?)", c, a.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// recoverStore applies mode to the damaged store in dir: moves its files
// aside and, for RecoverSalvage, copies what can be read into a new
// database. It returns what it did, for the log.
func recoverStore(ctx context.Context, dir, mode string, cause error, now time.Time) (string, error) {
	aside, err := moveAside(dir, now)
	if err != nil {
		return "", err
	}
	note := fmt.Sprintf("the damaged store was moved to %s (%v)", aside, cause)
	_ = os.WriteFile(filepath.Join(aside, "README.txt"), []byte("Moved aside by switchboard serve --recover "+mode+":\n"+cause.Error()+"\n"), 0o600)
	if mode == RecoverFresh {
		return note + "; starting with an empty store", nil
	}
	from := filepath.Join(aside, dbFile)
	if st, err := os.Stat(from); err != nil || st.Size() == 0 {
		return note + "; nothing to salvage (no database file), starting with an empty store", nil
	}
	// Salvage from a copy, so the files moved aside stay as they were.
	work := filepath.Join(aside, "salvage-source")
	if err := os.Mkdir(work, 0o700); err != nil {
		return "", err
	}
	for _, name := range []string{dbFile, dbFile + "-wal"} {
		if err := copyFile(filepath.Join(aside, name), filepath.Join(work, name)); err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("sqlite: salvage: %w", err)
		}
	}
	report, err := salvage(ctx, filepath.Join(work, dbFile), filepath.Join(dir, dbFile))
	_ = os.RemoveAll(work)
	if err != nil {
		return "", fmt.Errorf("sqlite: salvage from %s: %w", aside, err)
	}
	_ = os.WriteFile(filepath.Join(aside, "SALVAGE.txt"), []byte(report+"\n"), 0o600)
	return note + "; salvaged into a new database:\n" + report, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
