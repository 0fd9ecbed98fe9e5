#!/usr/bin/env bash
# Runs the A2A TCK (a2aproject/a2a-tck) against a Switchboard hub, for each
# binding the hub serves (JSON-RPC, HTTP+JSON, gRPC), with auth on (the
# hub's bearer scheme, declared in its cards) and over TLS (--tls-cert).
# Not a test of the suite: the TCK cannot be fetched in CI and its code is
# not in this repository. Point A2A_TCK_DIR at a checkout to run it:
#
#   A2A_TCK_DIR=/path/to/a2a-tck test/interop/a2a/tck/run.sh [OUT_DIR]
#
# It needs python3 ($PYTHON, default /usr/bin/python3) with pytest, pytest-asyncio, httpx, requests, grpcio,
# protobuf, jsonschema, yaml, dotenv, OpenSSL, aiohttp, deepdiff and
# responses (Debian: apt-get install python3-pytest python3-pytest-asyncio
# python3-httpx python3-requests python3-grpcio python3-protobuf
# python3-jsonschema python3-yaml python3-dotenv python3-openssl
# python3-aiohttp python3-deepdiff python3-responses), and openssl.
# shim/tckshim.py lets the TCK's gRPC stubs load on Debian 12's older
# protobuf and grpcio. Each run's pytest summary goes to OUT_DIR
# (default: a temporary directory); the last lines of each are printed.
# TCK_TESTS chooses the TCK test paths [tests/mandatory tests/optional].
set -euo pipefail
if [[ -z "${A2A_TCK_DIR:-}" ]]; then
	echo "run.sh: A2A_TCK_DIR is not set: skipping the A2A TCK (point it at an a2aproject/a2a-tck checkout)"
	exit 0
fi
here="$(cd "$(dirname "$0")" && pwd)"
# Debian's python3, where apt installs the packages (not a pyenv one).
py="${PYTHON:-/usr/bin/python3}"
root="$(cd "$here/../../../.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
work="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
(cd "$root" && go build -o "$work/switchboard" ./cmd/switchboard && go build -o "$work/harness" ./test/interop/a2a/tck/harness)
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
	-keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
token="sba_tck-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_hub MODE: dev, auth or tls; sets hub_url.
start_hub() {
	local port; port=$(free_port)
	local args=(serve --addr "127.0.0.1:$port" --data "$work/data-$1")
	hub_url="http://localhost:$port"
	case "$1" in
	dev) args+=(--dev) ;;
	auth) args+=(--admin-token "$token" --allow-loopback-callbacks) ;;
	tls) args+=(--admin-token "$token" --allow-loopback-callbacks --tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
		hub_url="https://localhost:$port" ;;
	esac
	"$work/switchboard" "${args[@]}" >"$out/hub-$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do curl -ksf "$hub_url/healthz" >/dev/null && return; sleep 0.1; done
	echo "run.sh: the hub ($1) did not start; see $out/hub-$1.log" >&2
	exit 1
}

# start_harness MODE; sets sut_url.
start_harness() {
	local args=(-hub "$hub_url" -agent "tck-$1")
	[[ $1 != dev ]] && args+=(-token "$token")
	[[ $1 == tls ]] && args+=(-tls-cert "$work/cert.pem" -tls-key "$work/key.pem")
	"$work/harness" "${args[@]}" >"$work/harness-$1.out" 2>"$out/harness-$1.log" &
	pids+=($!)
	for _ in $(seq 100); do
		sut_url=$(sed -n 's/^SUT_URL=//p' "$work/harness-$1.out")
		[[ -n $sut_url ]] && return
		sleep 0.1
	done
	echo "run.sh: the harness ($1) did not start; see $out/harness-$1.log" >&2
	exit 1
}

# tck NAME TRANSPORT MODE: runs the TCK's tests on one binding.
tck() {
	local name=$1 transport=$2 mode=$3
	local env=(PYTHONPATH="$here/shim")
	if [[ $mode != dev ]]; then env+=(A2A_AUTH_TYPE=bearer A2A_AUTH_TOKEN="$token"); fi
	[[ $mode == tls ]] && env+=(SSL_CERT_FILE="$work/cert.pem" REQUESTS_CA_BUNDLE="$work/cert.pem" GRPC_DEFAULT_SSL_ROOTS_FILE_PATH="$work/cert.pem")
	echo "== $name: $transport, $mode ($sut_url)"
	(cd "$A2A_TCK_DIR" && env "${env[@]}" timeout 1800 "$py" -m pytest -p tckshim -p no:cacheprovider ${TCK_TESTS:-tests/mandatory tests/optional} \
		--sut-url "$sut_url" --transports "$transport" --transport-strategy "prefer_$transport" --test-scope all -q -rfs \
		>"$out/$name.txt" 2>&1) || true
	tail -n 1 "$out/$name.txt"
}

for mode in dev auth tls; do
	start_hub "$mode"
	start_harness "$mode"
	for transport in jsonrpc rest grpc; do
		tck "$mode-$transport" "$transport" "$mode"
	done
done
echo "summaries in $out"
