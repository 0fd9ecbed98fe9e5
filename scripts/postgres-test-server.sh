#!/usr/bin/env bash
# postgres-test-server.sh — a throwaway PostgreSQL cluster for Switchboard's
# store tests (Debian, run as root).
#
#   scripts/postgres-test-server.sh start [DIR] [PORT]   # prints the test URL
#   scripts/postgres-test-server.sh stop  [DIR]          # stops it (the files stay)
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
# DIR=/tmp/switchboard-pg (or $PGTEST_DIR); PORT $PGTEST_PORT, or 0: a free
# port chosen by trying to start on random ports between 20000 and 32767
# until one is free (below Linux's ephemeral range, 32768-60999, so an
# outgoing connection's source port cannot take it between runs). A
# cluster already running in DIR keeps its port. A given port that is
# taken fails with a message saying so.
set -euo pipefail

cmd="${1:-start}"
dir="${2:-${PGTEST_DIR:-/tmp/switchboard-pg}}"
port="${3:-${PGTEST_PORT:-0}}"
db="switchboard_test"
url_for() { echo "postgres://postgres@127.0.0.1:${1}/${db}?sslmode=disable"; }

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
		port=$(sed -n 4p "$dir/postmaster.pid")
		log "already running in $dir on port $port"
	elif [ "$port" = 0 ]; then
		local try
		for try in 1 2 3 4 5 6 7 8 9 10; do
			port=$((20000 + RANDOM % 12768))
			if try_start "$bin" "$port"; then
				break
			fi
			grep -q 'in use' "$dir/server.log" 2>/dev/null || { tail -n 30 "$dir/server.log" >&2 || true; die "pg_ctl start failed"; }
			log "port $port is taken; trying another"
			port=0
		done
		[ "$port" != 0 ] || die "no free port found in 10 tries"
	else
		try_start "$bin" "$port" || {
			tail -n 30 "$dir/server.log" >&2 || true
			grep -q 'in use' "$dir/server.log" 2>/dev/null && die "port $port on 127.0.0.1 is taken; choose another, or 0 for a free one"
			die "pg_ctl start failed"
		}
	fi
	if ! as_postgres "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
		as_postgres "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db" >&2
	fi
	log "ready; export SWITCHBOARD_TEST_POSTGRES='$(url_for "$port")'"
	url_for "$port"
}

# try_start BIN PORT starts the cluster on 127.0.0.1:PORT; it fails (with
# "in use" in server.log) when the port is taken.
try_start() {
	local opts="-h 127.0.0.1 -p $2 -k $dir -c max_connections=300"
	if [ "${PGTEST_FAST:-}" = 1 ]; then
		opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	fi
	log "starting on 127.0.0.1:$2"
	: > "$dir/server.log"
	chown postgres:postgres "$dir/server.log"
	# The socket goes in the data directory so no system directory is needed.
	as_postgres "$1/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start -o "$opts" >&2
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
url)
	[ "$port" != 0 ] || [ ! -f "$dir/postmaster.pid" ] || port=$(sed -n 4p "$dir/postmaster.pid")
	url_for "$port"
	;;
*) die "usage: $0 start|stop|url [DIR] [PORT]" ;;
esac
