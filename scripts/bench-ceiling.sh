#!/usr/bin/env bash
# scripts/bench-ceiling.sh — the embedded hub against the ceiling it works
# under: a bare net/http handler that answers /atp/send at once
# (scripts/bare-atp), with the same load tool on the same machine, side by
# side. Each round runs, in turn: the bare handler at 64 senders; the hub
# (auth on, durable, fresh data directory, push receiver) at 64 senders
# with 1 lane and with 16 lanes; and the hub at 8 senders (latency).
# Prints one line per run.
#
#   scripts/bench-ceiling.sh [SECONDS] [ROUNDS] [RECEIVE]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}
rounds=${2:-3}
receive=${3:-push}
work=$(mktemp -d /tmp/switchboard-ceiling.XXXXXX)
go build -o "$work/switchboard" ./cmd/switchboard
go build -o "$work/bare" ./scripts/bare-atp
token=sba_bench-admin-token
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
line() { # name json
	python3 - "$@" <<'PY'
import json, sys
name, out = sys.argv[1], sys.argv[2]
r = json.loads(out)
print(f"{name:22s} accepted {r['accepted_per_sec']:7.0f}/s delivered {r['delivered_per_sec']:7.0f}/s "
      f"send p50 {r['send_p50_ns']/1e6:5.1f} ms p99 {r['send_p99_ns']/1e6:6.1f} ms, "
      f"CPU/msg hub {r.get('hub_cpu_per_message_ns', 0)/1e3:4.0f} us load {r.get('load_cpu_per_message_ns', 0)/1e3:4.0f} us, errors {r['errors']}, duplicates {r['duplicate_deliveries']}")
PY
}
for round in $(seq 1 "$rounds"); do
	echo "round $round, load $(cut -d' ' -f1-3 /proc/loadavg)"
	addr="127.0.0.1:$(freeport)"
	"$work/bare" -addr "$addr" >/dev/null &
	pid=$!
	until curl -s -o /dev/null "http://$addr/"; do sleep 0.05; done
	line "bare handler, 64" "$("$work/switchboard" bench --hub "http://$addr" --senders 64 --duration "${secs}s" --drain 1ms --json --quiet)"
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	for run in "64 1" "64 16" "8 64"; do
		set -- $run
		addr="127.0.0.1:$(freeport)"
		rm -rf "$work/data"
		"$work/switchboard" serve --addr "$addr" --data "$work/data" --admin-token "$token" --rate-limit -1 \
			--allow-loopback-callbacks --log-level warn 2>>"$work/hub.log" &
		pid=$!
		until curl -sf "http://$addr/readyz" >/dev/null; do sleep 0.05; done
		lanes="$2 lane(s)"
		[ "$2" = 64 ] && lanes="64 lanes"
		line "hub, $1 senders, $lanes" "$("$work/switchboard" bench --hub "http://$addr" --token "$token" --senders "$1" --sender-agents "$2" --receive "$receive" --duration "${secs}s" --json --quiet)"
		kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	done
done
