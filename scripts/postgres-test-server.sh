#!/usr/bin/env bash
# postgres-test-server.sh — a throwaway PostgreSQL cluster for Switchboard's
# store tests (Debian, run as root).
#
#   scripts/postgres-test-server.sh start [DIR] [PORT]   # prints the test URL
#   scripts/postgres-test-server.sh stop  [DIR]
#   scripts/postgres-test-server.sh url   [DIR] [PORT]
#
# start installs PostgreSQL from Debian's packages if it is missing, creates a
# cluster in DIR with initdb (as the postgres user), starts it on
# 127.0.0.1:PORT with pg_ctl, creates the database "switchboard_test" and
# prints the URL on stdout, so CI can do
#
#   export SWITCHBOARD_TEST_POSTGRES="$(scripts/postgres-test-server.sh start)"
#
# Everything else goes to stderr. The cluster trusts local connections: it is
# for tests only. It keeps PostgreSQL's durable defaults (fsync, synchronous
# commit), so benchmarks against it measure durable writes; set PGTEST_FAST=1
# before start to turn them off for quicker test runs. Defaults:
# DIR=/tmp/switchboard-pg, PORT=25432 (or $PGTEST_DIR / $PGTEST_PORT); the
# port is below Linux's ephemeral range (32768-60999), so an outgoing
# connection's source port cannot be holding it.
set -euo pipefail

cmd="${1:-start}"
dir="${2:-${PGTEST_DIR:-/tmp/switchboard-pg}}"
port="${3:-${PGTEST_PORT:-25432}}"
db="switchboard_test"
url="postgres://postgres@127.0.0.1:${port}/${db}?sslmode=disable"

log() { echo "postgres-test-server: $*" >&2; }
die() { log "$*"; exit 1; }

bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
	[ -n "$d" ] && [ -x "$d/initdb" ] || return 1
	echo "$d"
}

as_postgres() {
	if [ "$(id -u)" -eq 0 ]; then
		# runuser keeps no controlling terminal and needs no password.
		runuser -u postgres -- "$@"
	elif [ "$(id -un)" = postgres ]; then
		"$@"
	else
		die "run as root (or as the postgres user)"
	fi
}

install_postgres() {
	if bindir >/dev/null; then
		return
	fi
	[ "$(id -u)" -eq 0 ] || die "PostgreSQL is not installed and installing it needs root"
	log "installing PostgreSQL from Debian packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends postgresql >&2
	bindir >/dev/null || die "initdb not found under /usr/lib/postgresql/*/bin after install"
}

start() {
	install_postgres
	local bin
	bin="$(bindir)"
	id postgres >/dev/null 2>&1 || die "no postgres user (the postgresql package creates it)"
	mkdir -p "$dir"
	chown postgres:postgres "$dir"
	chmod 700 "$dir"
	if [ ! -f "$dir/PG_VERSION" ]; then
		log "initdb $dir"
		as_postgres "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >&2 \
			|| as_postgres "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --no-locale >&2
	fi
	if as_postgres "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
		log "already running in $dir"
	else
		local opts="-h 127.0.0.1 -p $port -k $dir -c max_connections=300"
		if [ "${PGTEST_FAST:-}" = 1 ]; then
			opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
		fi
		log "starting on 127.0.0.1:$port"
		# The socket goes in the data directory so no system directory is needed.
		as_postgres "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start -o "$opts" >&2 \
			|| { tail -n 30 "$dir/server.log" >&2 || true; die "pg_ctl start failed"; }
	fi
	if ! as_postgres "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
		as_postgres "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db" >&2
	fi
	log "ready; export SWITCHBOARD_TEST_POSTGRES='$url'"
	echo "$url"
}

stop() {
	local bin
	bin="$(bindir)" || die "PostgreSQL is not installed"
	if [ -f "$dir/postmaster.pid" ]; then
		as_postgres "$bin/pg_ctl" -D "$dir" -m fast -w stop >&2
	else
		log "not running in $dir"
	fi
}

case "$cmd" in
start) start ;;
stop) stop ;;
url) echo "$url" ;;
*) die "usage: $0 start|stop|url [DIR] [PORT]" ;;
esac
