#!/usr/bin/env bash
# scripts/bench-scaleout.sh — the embedded hub and 1 and 2 hubs on one
# PostgreSQL, side by side in one run: for each round, for each lane count,
# each setup gets a fresh store and a fresh hub (auth on, durable: SQLite
# fsync on every commit; PostgreSQL fsync and synchronous_commit on) and a
# `switchboard bench` of SECONDS with 64 senders, receiving by push. The
# setups are interleaved, so a change in the shared machine's load hits
# them alike. Prints one line per run: accepted/s, delivered/s, send p99,
# the hubs' CPU per message and PostgreSQL's (its processes' user+system
# time from /proc over the run, per accepted message), the transactions
# PostgreSQL committed per accepted message (pg_stat_database), and the
# load average.
#
#   scripts/bench-scaleout.sh [SECONDS] [ROUNDS] [LANES] [SETUPS] [PORT]
#
# LANES is a comma list of lane counts (sender agents × 1 receiver;
# default 1,16), SETUPS of embedded, pg1, pg2, pg3 (default all but pg3).
# With STATEMENTS=N in the environment the cluster loads
# pg_stat_statements and each PostgreSQL run also prints its N most
# frequent statements: calls and execution time per accepted message.
# With PPROF=DIR each hub serves pprof and a CPU profile of each hub over
# the bench is written to DIR/<setup>-lanes<L>-r<round>-hub<i>.pprof.
# With BIN=PATH that binary is run instead of one built from this tree
# (to compare builds, run the script once per build, interleaved).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}
rounds=${2:-1}
lanes=${3:-1,16}
setups=${4:-embedded,pg1,pg2}
port=${5:-25440}
work=$(mktemp -d /tmp/switchboard-scaleout.XXXXXX)
chmod 755 "$work"
bin=${BIN:-}
if [ -z "$bin" ]; then
	bin=$work/switchboard
	go build -o "$bin" ./cmd/switchboard
fi
pgdir=$work/pg
base=$(PGTEST_FAST= scripts/postgres-test-server.sh start "$pgdir" "$port")
statements=${STATEMENTS:-0}
pprofdir=${PPROF:-}
if [ -n "$pprofdir" ]; then mkdir -p "$pprofdir"; fi
if [ "$statements" -gt 0 ]; then
	scripts/postgres-test-server.sh stop "$pgdir" >/dev/null 2>&1
	printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n" >>"$pgdir/postgresql.conf"
	PGTEST_FAST= scripts/postgres-test-server.sh start "$pgdir" "$port" >/dev/null
	psql -q "$base" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
fi
token=sba_bench-admin-token
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	scripts/postgres-test-server.sh stop "$pgdir" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# pgcpu prints the CPU seconds (user+system) used so far by the cluster's
# processes: the postmaster, the children it has reaped (its cutime and
# cstime: backends of connections already closed) and its live children.
# A child that exits while it is read is skipped, not an error: other
# processes come and go on a shared machine.
pgcpu() {
	local pm tck total=0 p stat f
	pm=$(head -1 "$pgdir/postmaster.pid")
	tck=$(getconf CLK_TCK)
	for p in "$pm" $(pgrep -P "$pm"); do
		stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		# The fields after the command name, which may hold spaces:
		# f[11] utime, f[12] stime, f[13] cutime, f[14] cstime (fields 14-17).
		read -ra f <<<"${stat##*) }"
		total=$((total + f[11] + f[12]))
		if [ "$p" = "$pm" ]; then total=$((total + f[13] + f[14])); fi
	done
	awk -v t="$total" -v tck="$tck" 'BEGIN { printf "%.3f\n", t / tck }'
}

# commits prints the transactions committed so far in database $1 (0 for
# none): PostgreSQL's statistics, which backends flush within a second or
# so of going idle, hence the pause.
commits() {
	if [ -z "$1" ]; then echo 0; return; fi
	sleep 1.5
	psql -qtA "$base" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$1'"
}

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

run=0
for round in $(seq 1 "$rounds"); do
	for l in ${lanes//,/ }; do
		for setup in ${setups//,/ }; do
			run=$((run + 1))
			hubs=()
			pids=()
			db=""
			case $setup in
			embedded) n=1 ;;
			pg*) n=${setup#pg}
				db="bench_${run}_$$"
				psql -q "$base" -c "CREATE DATABASE $db" >/dev/null
				url="${base%/*}/$db?sslmode=disable"
				"$bin" migrate --store "$url" >/dev/null ;;
			*) echo "unknown setup $setup" >&2; exit 2 ;;
			esac
			pprofs=()
			for i in $(seq 1 "$n"); do
				addr="127.0.0.1:$(freeport)"
				mkdir -p "$work/h$run-$i"
				extra=()
				if [ -n "$db" ]; then extra+=(--store "$url"); fi
				if [ -n "$pprofdir" ]; then
					paddr="127.0.0.1:$(freeport)"
					extra+=(--pprof "$paddr")
					pprofs+=("$paddr")
				fi
				"$bin" serve --addr "$addr" "${extra[@]}" --admin-token "$token" --rate-limit -1 \
					--allow-loopback-callbacks --data "$work/h$run-$i" --log-level warn 2>"$work/h$run-$i.log" &
				pids+=($!)
				hubs+=("http://$addr")
			done
			for h in "${hubs[@]}"; do
				until curl -sf "$h/readyz" >/dev/null; do sleep 0.1; done
			done
			list=$(IFS=,; echo "${hubs[*]}")
			load=$(cut -d' ' -f1 /proc/loadavg)
			pg0=$(pgcpu)
			x0=$(commits "$db")
			if [ "$statements" -gt 0 ]; then psql -q "$base" -c "SELECT pg_stat_statements_reset()" >/dev/null; fi
			profs=()
			for i in "${!pprofs[@]}"; do
				curl -so "$pprofdir/$setup-lanes$l-r$round-hub$((i + 1)).pprof" \
					"http://${pprofs[$i]}/debug/pprof/profile?seconds=$((secs > 2 ? secs - 1 : 1))" &
				profs+=($!)
			done
			if ! out=$("$bin" bench --hubs "$list" --token "$token" --senders 64 --sender-agents "$l" --duration "${secs}s" --json --quiet 2>"$work/bench.err"); then
				echo "$setup lanes $l: bench failed: $(tail -3 "$work/bench.err")"
				for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
				pids=()
				continue
			fi
			for p in "${profs[@]}"; do wait "$p" || true; done
			pg1=$(pgcpu)
			x1=$(commits "$db")
			python3 - "$setup" "$l" "$load" "$pg0" "$pg1" "$x0" "$x1" "$out" <<'EOF'
import json, sys
setup, lanes, load, pg0, pg1, x0, x1, out = sys.argv[1:]
r = json.loads(out)
acc = r["accepted"]
pg = (float(pg1) - float(pg0)) / acc * 1e6 if acc and setup != "embedded" else 0
tx = (int(x1) - int(x0)) / acc if acc and setup != "embedded" else 0
print(f"{setup:8s} lanes {int(lanes):2d}: accepted {r['accepted_per_sec']:7.0f}/s delivered {r['delivered_per_sec']:7.0f}/s "
      f"send p50 {r['send_p50_ns']/1e6:6.1f} ms p99 {r['send_p99_ns']/1e6:6.1f} ms, "
      f"CPU/msg hub {r.get('hub_cpu_per_message_ns', 0)/1e3:5.0f} us postgres {pg:5.0f} us, commits/msg {tx:4.2f}, "
      f"errors {r['errors']}, duplicates {r['duplicate_deliveries']}, load {load}")
EOF
			if [ -n "$db" ] && [ "$statements" -gt 0 ]; then
				acc=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["accepted"] or 1)' "$out")
				psql -qtA -F ' | ' "$base" -c "SELECT round(calls::numeric / $acc, 3) AS calls_per_msg,
					round((total_exec_time * 1000 / $acc)::numeric, 1) AS exec_us_per_msg,
					left(regexp_replace(query, '\s+', ' ', 'g'), 100)
					FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$db')
					ORDER BY calls DESC LIMIT $statements" | sed 's/^/    /'
			fi
			for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
			pids=()
			if [ -n "$db" ]; then psql -q "$base" -c "DROP DATABASE $db" >/dev/null; fi
		done
	done
done
