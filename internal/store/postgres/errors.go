package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// wrap names the store operation that failed and classifies err (see
// classify), so callers can tell a client's bad input from an outage.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: %s: %w", op, classify(err))
}

// classify marks err with the core error a caller acts on:
//
//   - core.ErrInvalid for data PostgreSQL cannot store (class 22, data
//     exceptions: a NUL or invalid UTF-8 in text, a value out of range;
//     54000: a value too big for an index entry),
//     which the stores refuse before writing where they can (see
//     core.CheckStorable); a 400-class answer, not a 500;
//   - core.ErrStorageFull for a full disk (53100);
//   - core.ErrUnavailable for an outage: no connection could be made or the
//     connection broke, the server is shutting down or starting, out of
//     connections or memory, or a standby that cannot write (after a
//     failover, until the hubs reconnect to the new primary); a 503 with
//     Retry-After, and the next request, on a fresh connection, may succeed.
//
// Errors already marked, and others, are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, core.ErrInvalid) || errors.Is(err, core.ErrUnavailable) ||
		errors.Is(err, core.ErrStorageFull) || errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrConflict) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return fmt.Errorf("%w: %w", core.ErrStorageFull, err)
		case strings.HasPrefix(pe.Code, "22"), // data exception
			pe.Code == "54000": // program_limit_exceeded: a value too big to index
			return fmt.Errorf("%w: %w", core.ErrInvalid, err)
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),                           // insufficient resources
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin or crash shutdown, cannot connect now
			pe.Code == "25006": // read_only_sql_transaction: a standby
			return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
		}
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	return err
}

// unreachable reports whether err says the server could not be reached or
// the connection to it broke.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne) && !ne.Timeout():
		return true
	}
	// pgx reports a statement that never reached the server as safe to
	// retry, and a connection it found closed by this text.
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}
