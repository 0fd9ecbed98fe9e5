#!/usr/bin/env bash
# scripts/bench-scaleout.sh — throughput of 1, 2 and 3 hub instances on one
# PostgreSQL (durable settings: fsync and synchronous_commit on), 64 senders
# spread across the instances, 10 s per run. Prints one line per run.
#
#   scripts/bench-scaleout.sh [SECONDS] [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
port=${2:-25440}
bin=$(mktemp -d)/switchboard
go build -o "$bin" ./cmd/switchboard
pgdir=$(mktemp -d /tmp/switchboard-pg-bench.XXXXXX)
chmod 755 "$pgdir"
base=$(PGTEST_FAST= scripts/postgres-test-server.sh start "$pgdir" "$port")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	scripts/postgres-test-server.sh stop "$pgdir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
for n in 1 2 3; do
	db="bench${n}_$$"
	psql -q "$base" -c "CREATE DATABASE $db" >/dev/null
	url="${base%/*}/$db?sslmode=disable"
	"$bin" migrate --store "$url" >/dev/null
	hubs=()
	pids=()
	for i in $(seq 1 "$n"); do
		addr="127.0.0.1:$((18180 + i))"
		"$bin" serve --dev --addr "$addr" --store "$url" --log-level warn 2>/dev/null &
		pids+=($!)
		hubs+=("http://$addr")
	done
	for h in "${hubs[@]}"; do
		until curl -sf "$h/readyz" >/dev/null; do sleep 0.1; done
	done
	list=$(IFS=,; echo "${hubs[*]}")
	printf 'instances %d (load %s): ' "$n" "$(cut -d' ' -f1-3 /proc/loadavg)"
	"$bin" bench --hubs "$list" --senders 64 --duration "${secs}s" --quiet | tr '\n' ' '
	echo
	for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
	pids=()
	psql -q "$base" -c "DROP DATABASE $db" >/dev/null
done
