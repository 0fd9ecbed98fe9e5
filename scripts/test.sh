#!/usr/bin/env bash
# scripts/test.sh — runs Switchboard's whole test suite on a fresh Debian
# machine, installing what the tests need first:
#   - Debian packages: the ATP tutorial's Python clients (python3-fastapi,
#     python3-uvicorn, python3-httpx), PostgreSQL, Chromium, and — when the
#     commands are missing — Node.js with npm and gcc (for -race);
#   - npm packages of the interop and browser tests, from their lock files;
#   - a throwaway PostgreSQL cluster on a free port of 127.0.0.1 for the
#     store contract suite and the multi-instance tests (stopped and
#     removed again at the end, also when the script fails or is
#     interrupted).
# Then: gofmt, go vet, staticcheck, `go test -race ./...`, and a short run of
# every fuzz target.
#
# Run it as root (or with sudo available): it installs packages, starts
# PostgreSQL as the postgres user, and one fault test mounts a small tmpfs.
#
# Environment: PGTEST_PORT (default 0: a free port), FUZZTIME (default 10000x: 10,000 inputs per target, a count
# rather than a duration because Go 1.26's fuzzing coordinator can fail a
# target with "context deadline exceeded" when a -fuzztime duration runs
# out, golang/go#75804; 0 skips fuzzing),
# SKIP_INSTALL=1 to use what is installed, GOFLAGS as usual, CI (set by
# .ci/run: a test whose tool — python3, node, chromium — is missing fails
# instead of skipping).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CI="${CI:-}"

step() { printf '\n== %s ==\n' "$*"; }

apt_pkgs=(python3-fastapi python3-uvicorn python3-httpx postgresql chromium)
if [ -z "${SKIP_INSTALL:-}" ]; then
	step "Debian packages"
	missing=()
	for p in "${apt_pkgs[@]}"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	# Tools looked for by command, since they may come from elsewhere (a
	# Node.js from NodeSource brings its own npm): Node.js and npm for the
	# SDK interop and browser tests, a C toolchain for -race.
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
	command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
	if [ ${#missing[@]} -gt 0 ]; then
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
	echo "ok: ${apt_pkgs[*]} node npm gcc"

	step "npm packages (from lock files)"
	while IFS= read -r lock; do
		dir=$(dirname "$lock")
		echo "npm ci in $dir"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	done < <(git ls-files '*package-lock.json' | grep -v node_modules)
fi

step "PostgreSQL"
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-pg.XXXXXX")
cleanup() {
	scripts/postgres-test-server.sh stop "$pgdir/data" >/dev/null 2>&1 || true
	rm -rf "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$pgdir"
export PGTEST_FAST=1
# Port 0: the script starts the cluster on a free port and prints its URL.
SWITCHBOARD_TEST_POSTGRES=$(scripts/postgres-test-server.sh start "$pgdir/data" "${PGTEST_PORT:-0}")
export SWITCHBOARD_TEST_POSTGRES
echo "ok: $SWITCHBOARD_TEST_POSTGRES"

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change:"; echo "$bad"; exit 1; fi
echo ok

step "go vet"
go vet ./...
echo ok

step "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo ok

step "go test -race ./..."
go test -race -count=1 -timeout 30m ./...

fuzztime=${FUZZTIME:-10000x}
fuzz() { go test -run='^$' -fuzz="^${2}\$" -fuzztime="$fuzztime" "$1" 2>&1; }
if [ "$fuzztime" != "0" ]; then
	step "fuzzing (each target, -fuzztime $fuzztime)"
	while IFS= read -r file; do
		pkg="./$(dirname "$file")"
		for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
			echo "$pkg $target"
			if ! out=$(fuzz "$pkg" "$target"); then
				echo "$out" | tail -40
				# A failing input (the fuzzer wrote it to testdata) fails
				# the lane at once. Only a fuzzing worker that stalled on a
				# busy machine (the coordinator's own error, no input) is
				# run once more.
				if grep -q 'Failing input written to' <<<"$out" || ! grep -q 'fuzzing process hung or terminated unexpectedly\|context deadline exceeded' <<<"$out"; then
					exit 1
				fi
				echo "$pkg $target: the fuzzing worker stalled; running it once more"
				if ! out=$(fuzz "$pkg" "$target"); then
					echo "$out" | tail -40
					exit 1
				fi
			fi
		done
	done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz')
fi

step "done"
echo "all tests passed"
