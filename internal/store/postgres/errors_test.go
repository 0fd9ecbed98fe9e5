package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-hub/switchboard/internal/core"
)

func TestClassify(t *testing.T) {
	// A real connection error: a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, connErr := pgx.Connect(context.Background(), "postgres://x@"+addr+"/db?sslmode=disable&connect_timeout=2")
	if connErr == nil {
		t.Fatal("connected to a closed port")
	}
	cases := []struct {
		name string
		err  error
		want error // nil: left unmarked
	}{
		{"NUL in text", &pgconn.PgError{Code: "22021"}, core.ErrInvalid},
		{"index entry too big", &pgconn.PgError{Code: "54000"}, core.ErrInvalid},
		{"NUL in jsonb", &pgconn.PgError{Code: "22P05"}, core.ErrInvalid},
		{"value too long", &pgconn.PgError{Code: "22001"}, core.ErrInvalid},
		{"disk full", &pgconn.PgError{Code: "53100"}, core.ErrStorageFull},
		{"too many connections", &pgconn.PgError{Code: "53300"}, core.ErrUnavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, core.ErrUnavailable},
		{"starting up", &pgconn.PgError{Code: "57P03"}, core.ErrUnavailable},
		{"a standby after failover", &pgconn.PgError{Code: "25006"}, core.ErrUnavailable},
		{"connection failure", &pgconn.PgError{Code: "08006"}, core.ErrUnavailable},
		{"refused connection", connErr, core.ErrUnavailable},
		{"broken connection", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), core.ErrUnavailable},
		{"unique violation", &pgconn.PgError{Code: "23505"}, nil},
		{"syntax error", &pgconn.PgError{Code: "42601"}, nil},
		{"canceled", context.Canceled, nil},
		{"already not found", fmt.Errorf("x: %w", core.ErrNotFound), core.ErrNotFound},
	}
	for _, c := range cases {
		got := wrap("op", c.err)
		if !errors.Is(got, c.err) {
			t.Errorf("%s: wrap lost the cause: %v", c.name, got)
		}
		for _, sentinel := range []error{core.ErrInvalid, core.ErrStorageFull, core.ErrUnavailable} {
			if errors.Is(got, sentinel) != (c.want == sentinel) {
				t.Errorf("%s: errors.Is(%v, %v) = %v", c.name, got, sentinel, !(c.want == sentinel))
			}
		}
	}
	if wrap("op", nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}

func TestReceiptPayloads(t *testing.T) {
	var ids []string
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("%032x", i))
	}
	ps := receiptPayloads(encodeEnded(endedIDs(ids)))
	if len(ps) < 4 || len(ps) > 6 {
		t.Errorf("1,000 ids of 32 bytes in %d payloads", len(ps))
	}
	var back []string
	for _, p := range ps {
		if len(p) > maxPayload {
			t.Errorf("payload of %d bytes", len(p))
		}
		back = append(back, ReceiptIDs(p)...)
	}
	if fmt.Sprint(back) != fmt.Sprint(ids) {
		t.Error("ids changed on the way")
	}
	if receiptPayloads(nil) != nil || ReceiptIDs("") != nil {
		t.Error("no ids, some payload")
	}
}

func TestFlightsShareOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f flights[int]
		var calls atomic.Int32
		release := make(chan struct{})
		got := make(chan int, 8)
		for range 8 {
			go func() {
				v, _ := f.do("bob", func() (int, error) { calls.Add(1); <-release; return 42, nil })
				got <- v
			}()
		}
		synctest.Wait()
		close(release)
		for range 8 {
			if v := <-got; v != 42 {
				t.Fatalf("got %d", v)
			}
		}
		if calls.Load() != 1 {
			t.Errorf("%d reads for 8 concurrent callers", calls.Load())
		}
		// Once done, the next call reads again.
		if v, _ := f.do("bob", func() (int, error) { calls.Add(1); return 7, nil }); v != 7 || calls.Load() != 2 {
			t.Errorf("a later call: %d after %d reads", v, calls.Load())
		}
	})
}
