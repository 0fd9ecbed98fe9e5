package hubtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDB creates a fresh database on the PostgreSQL test server named
// by SWITCHBOARD_TEST_POSTGRES, for hubs to share (hub.Options.StoreURL),
// and returns its URL; the database is dropped when the test ends, after
// the hubs started after this call have stopped (cleanups run last
// first). Without the variable the test fails under CI (CI set) and is
// skipped elsewhere.
func PostgresDB(t testing.TB) string {
	t.Helper()
	base := os.Getenv("SWITCHBOARD_TEST_POSTGRES")
	if base == "" {
		msg := `SWITCHBOARD_TEST_POSTGRES is not set; start a test server with export SWITCHBOARD_TEST_POSTGRES="$(scripts/postgres-test-server.sh start)"`
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "sb_test_" + hex.EncodeToString(rnd[:])
	admin := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin("CREATE DATABASE " + pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := admin("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("SWITCHBOARD_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
