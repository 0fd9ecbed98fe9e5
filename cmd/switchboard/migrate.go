package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/store/postgres"
)

func init() { register("migrate", "apply the PostgreSQL schema migrations", runMigrate) }

func runMigrate(ctx context.Context, args []string, s stdio) int {
	fs := newFlagSet("migrate", `Usage: switchboard migrate --store postgres://…

Applies the PostgreSQL store's schema migrations and exits. Hubs also apply
them at start-up (safely, under an advisory lock, when several start at once);
this command is for doing it ahead of a deployment. The embedded store needs
no migration.`, s)
	url := fs.String("store", os.Getenv("SWITCHBOARD_STORE"), "PostgreSQL URL (env SWITCHBOARD_STORE)")
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	if !strings.HasPrefix(*url, "postgres://") && !strings.HasPrefix(*url, "postgresql://") {
		fmt.Fprintln(s.err, "migrate: --store must be a postgres:// URL")
		return exitUsage
	}
	if err := postgres.Migrate(ctx, *url); err != nil {
		fmt.Fprintf(s.err, "migrate: %v\n", err)
		return exitUnavail
	}
	fmt.Fprintln(s.out, "migrations applied")
	return exitOK
}
